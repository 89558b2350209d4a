// MIG: a diagram of a GPU's memory and compute slices. Pick a profile, click a start slot to place
// it (or type a layout), and see at once from /mig/check whether the driver would accept it and why.
// Pack a fleet edited inline (GPU models x counts, services by profile or memory), or from uploaded fleet
// and requests files with the mig-parted config to download.
import { add, api, clear, commands, debounce, download, el, errorBox, fmt, gpuList, isUnavailable, labelCells, liveStatus, readFile, unavailable } from './ui.js';

let gpuSelect, table = null, gpuId = '', instances = [], chosen = null;
let palette, diagram, layoutInput, layoutError, verdict, whole, status, haveCheck = false, checkSeq = 0;
// The instances of the last layout mig.check accepted: a refused layout (overlapping, over the compute
// budget, a start the driver does not allow) is not drawn; the diagram goes back to these (issue #18).
let accepted = [];

export async function init(panel, r) {
  const have = await commands();
  haveCheck = have.includes('mig.check');
  const gpus = (await gpuList()).filter((g) => g.mig && !g.mig_profile);
  status = liveStatus();
  gpuSelect = el('select', { id: 'mig-gpu', onchange: () => load(gpuSelect.value) }, gpus.map((g) => el('option', { value: g.id, text: g.name })));
  palette = el('div', { class: 'palette', role: 'group', 'aria-label': 'Profiles: choose one, then a start slot' });
  diagram = el('div', { class: 'mig-diagram' });
  layoutInput = el('input', { id: 'mig-layout', autocomplete: 'off', spellcheck: 'false', placeholder: 'profile@start,profile@start,... (or build it from the palette)' });
  layoutInput.addEventListener('change', () => check(layoutInput.value));
  verdict = el('div', { class: 'mig-verdict', role: 'status', 'aria-live': 'polite' });
  whole = el('div', { class: 'mig-whole', id: 'mig-whole', 'aria-live': 'polite' });
  layoutError = el('span', { id: 'mig-layout-error', class: 'layout-error', role: 'alert' });
  add(panel, 
    el('h2', { text: 'Share a GPU with MIG' }),
    el('p', { class: 'lead', text: 'A MIG instance takes whole memory slices at a start slot the driver allows, and a number of compute slices. Choose a profile, then a start slot; select a placed instance to remove it.' }),
    el('p', {}, el('label', { for: 'mig-gpu', text: 'GPU ' }), gpuSelect),
    palette, diagram,
    el('p', {}, el('label', { for: 'mig-layout', text: 'Layout ' }), layoutInput, ' ',
      el('button', { type: 'button', text: 'Check', onclick: () => check(layoutInput.value) }), ' ',
      el('button', { type: 'button', text: 'Clear', onclick: () => { instances = []; draw(); check(); } }), ' ',
      haveCheck ? el('button', { type: 'button', id: 'mig-whole-gpu', text: 'Use the whole GPU', title: 'Grow these instances into what is left free', onclick: () => useWholeGpu() }) : null, ' ', layoutError),
    haveCheck ? verdict : unavailable('Checking a layout (POST /api/v1/mig/check)'),
    whole,
    status,
    packSection(have.includes('mig.pack'), await gpuList()));
  const initial = r.params && r.params.get('gpu');
  if (initial && gpus.some((g) => g.id === initial)) gpuSelect.value = initial;
  if (gpus.length) await load(gpuSelect.value);
  else clear(diagram, el('p', { text: 'No MIG-capable GPU in this catalog.' }));
}

export async function route(panel, r) {
  const g = r.params && r.params.get('gpu');
  if (g && g !== gpuId && [...gpuSelect.options].some((o) => o.value === g)) {
    gpuSelect.value = g;
    await load(g);
  }
}

async function load(id) {
  gpuId = id;
  const r = await api(`/gpus/${encodeURIComponent(id)}`);
  if (!r.ok || !r.data.mig) { clear(diagram, errorBox(r.error || { message: `${id} has no MIG table` })); return; }
  table = r.data.mig;
  instances = [];
  accepted = [];
  layoutError.textContent = '';
  if (whole) clear(whole);
  chosen = null;
  clear(palette, el('span', { class: 'palette-label', text: 'Profile: ' }), table.profiles.map((p) => el('button', {
    type: 'button', class: 'profile', 'aria-pressed': 'false', 'data-profile': p.name,
    title: `${p.memory_mib} MiB, ${p.compute_slices} compute slices, ${p.sm_count} SMs; starts ${(p.placements || []).map((x) => x.start).join(', ')}`,
    onclick: (e) => {
      chosen = chosen === p.name ? null : p.name;
      for (const b of palette.querySelectorAll('button.profile')) b.setAttribute('aria-pressed', String(b.dataset.profile === chosen));
      draw();
      status.textContent = chosen ? `${chosen} chosen: select a highlighted start slot.` : 'No profile chosen.';
      e.currentTarget.focus();
    },
  }, p.name)));
  draw();
  check();
}

function profile(name) { return table && table.profiles.find((p) => p.name === name); }

// The layout grammar is the library's (mig.check parses typed text and answers its entries); the page
// only writes its own instances back: profile, @start when placed, [1c,2c] compute instances.
function layoutText() {
  return instances.map((i) => `${i.profile}${i.start === null ? '' : `@${i.start}`}${i.ci && i.ci.length ? `[${i.ci.join(',')}]` : ''}`).join(',');
}

const fromApi = (p) => ({ profile: p.profile, start: p.start === null || p.start === undefined ? null : p.start, ci: p.compute_instances || null });

// keepText: leave the layout box as typed (a refused layout stays there to be corrected).
function draw(keepText = false) {
  if (!table) return;
  if (!keepText) layoutInput.value = layoutText();
  const n = table.memory_slices;
  const p = chosen ? profile(chosen) : null;
  const starts = new Set(p ? (p.placements || []).map((x) => x.start) : []);
  const occupied = new Set();
  for (const i of instances) {
    const q = profile(i.profile);
    if (q && i.start !== null) for (let s = i.start; s < i.start + q.memory_slices; ++s) occupied.add(s);
  }
  const grid = el('div', { class: 'mig-grid', role: 'group', 'aria-label': `${gpuId}: ${n} memory slices` });
  grid.style.gridTemplateColumns = `repeat(${n}, minmax(0, 1fr))`;
  // Row 1: the placed instances, each spanning its memory slices.
  instances.forEach((inst, idx) => {
    const q = profile(inst.profile);
    const size = q ? q.memory_slices : 1;
    const b = el('button', { type: 'button', class: `instance inst-${idx % 8}${inst.start === null ? ' unplaced' : ''}`,
      'aria-label': `Remove ${inst.profile}${inst.start === null ? ' (no start slot yet)' : ` at slot ${inst.start}`}`,
      onclick: () => { instances.splice(idx, 1); draw(); check(); } },
    el('span', { class: 'inst-name', text: inst.profile }),
    el('span', { class: 'inst-detail', text: q ? `${q.compute_slices}/${table.compute_slices} compute · ${fmt(q.memory_mib / 1024, 3)} GiB` : 'unknown profile' }));
    b.style.gridRow = String(1 + (inst.start === null ? 1 : 0));
    b.style.gridColumn = inst.start === null ? `1 / span ${Math.min(size, n)}` : `${inst.start + 1} / span ${Math.min(size, n - inst.start)}`;
    grid.append(b);
  });
  // Last row: the start slots (below a row of unplaced instances, when there are any).
  const slotRow = instances.some((i) => i.start === null) ? '3' : '2';
  for (let s = 0; s < n; ++s) {
    const allowed = p && starts.has(s);
    const b = el('button', { type: 'button', class: `slot${allowed ? ' allowed' : ''}${occupied.has(s) ? ' used' : ''}`,
      'aria-label': `Memory slice ${s}${occupied.has(s) ? ', in use' : ''}${p ? (allowed ? `: place ${p.name} here` : `: ${p.name} cannot start here`) : ''}`,
      'data-slot': s, disabled: !p ? true : undefined,
      onclick: () => { instances.push({ profile: p.name, start: s }); draw(); check(); } },
    el('span', { text: `slice ${s}` }), allowed ? el('span', { class: 'slot-mark', 'aria-hidden': 'true', text: ' ◆' }) : null);
    b.style.gridRow = slotRow;
    b.style.gridColumn = `${s + 1}`;
    grid.append(b);
  }
  const usedCompute = instances.reduce((a, i) => a + ((profile(i.profile) || {}).compute_slices || 0), 0);
  const compute = el('div', { class: 'compute-row', 'aria-label': `Compute slices used: ${usedCompute} of ${table.compute_slices}` });
  compute.style.gridTemplateColumns = `repeat(${table.compute_slices}, minmax(0, 1fr))`;
  for (let c = 0; c < table.compute_slices; ++c) compute.append(el('span', { class: `cslice${c < usedCompute ? ' on' : ''}`, text: c < usedCompute ? '■' : '□' }));
  clear(diagram,
    el('p', { class: 'mig-summary', text: `${gpuId}: ${n} memory slices, ${table.compute_slices} compute slices, at most ${table.max_instances} instances.` }),
    grid,
    el('p', { class: 'compute-label', text: `Compute slices used: ${usedCompute} of ${table.compute_slices}` }), compute);
}

// Checks `typed` (text from the layout box) or the instances placed by clicking. The instances are
// redrawn from the answer: where the checker placed them when valid, else the entries it parsed.
async function check(typed) {
  if (!table) return;
  const text = typed === undefined ? layoutText() : typed.trim();
  if (!haveCheck) { if (typed === undefined) draw(); return; }
  const seq = ++checkSeq;
  if (!text) { instances = []; accepted = []; layoutError.textContent = ''; draw(); clear(verdict, el('p', { text: 'Empty layout: choose a profile and a start slot.' })); return; }
  const r = await api('/mig/check', { gpu: gpuId, layout: text });
  if (seq !== checkSeq) return;
  if (isUnavailable(r)) { clear(verdict, unavailable('Checking a layout', r.error)); return; }
  // Refused (an unknown profile, or the driver would not accept it): the reason beside the input, the
  // text kept there, the diagram back at the last accepted layout.
  const refuse = (reason) => {
    instances = accepted.map((i) => ({ ...i }));
    draw(true);
    layoutInput.value = text;
    layoutError.textContent = `✗ Refused: ${reason}`;
  };
  if (!r.ok) {
    refuse(r.error.message);
    clear(verdict, el('p', { class: 'invalid' }, el('strong', { text: '✗ Invalid: ' }), r.error.message));
    return;
  }
  const d = r.data;
  const entries = Array.isArray(d.entries) ? d.entries : [];
  const placed = d.valid && Array.isArray(d.placements) && d.placements.length === entries.length;
  if (d.valid) {
    instances = (placed ? d.placements : entries).map(fromApi);
    accepted = instances.map((i) => ({ ...i }));
    layoutError.textContent = '';
    draw();
  } else {
    refuse(`${d.reason || 'the driver would refuse it'}${d.rule ? ` (rule: ${d.rule})` : ''}`);
  }
  clear(verdict,
    d.valid ? el('p', { class: 'valid' }, el('strong', { text: '✓ Valid.' }), ' The driver accepts this layout.',
      d.stranded ? ` Left unused: ${d.stranded.memory_slices} memory and ${d.stranded.compute_slices} compute slices.` : '')
      : el('p', { class: 'invalid' }, el('strong', { text: '✗ Invalid: ' }), d.reason || 'the driver would refuse it', d.rule ? el('span', { class: 'muted', text: ` (rule: ${d.rule})` }) : null),
    d.valid && d.commands && d.commands.length ? [el('p', { text: 'Create it with:' }), el('pre', { class: 'commands' }, el('code', { text: d.commands.join('\n') }))] : null);
}

// "Use the whole GPU" (issue #18: "how do I split this A100 for these three services"): the instances
// of the accepted layout grow, a step at a time and in turn, to the next larger profile at the same start
// while mig.check accepts the layout; then the page says what each did, what is left and why. With no
// instance placed, the whole GPU is its largest profile (or no MIG at all). mig.check is the only judge.
const layoutOf = (list) => list.map((i) => `${i.profile}${i.start === null ? '' : `@${i.start}`}`).join(',');
async function useWholeGpu() {
  if (!table) return;
  const ask = (list) => api('/mig/check', { gpu: gpuId, layout: layoutOf(list) });
  const largest = [...table.profiles].sort((a, b) => b.compute_slices - a.compute_slices || b.memory_slices - a.memory_slices)[0];
  if (!accepted.length) {
    instances = [{ profile: largest.name, start: 0 }];
    draw();
    await check();
    clear(whole, el('p', { class: 'whole-answer' }, el('strong', { text: 'The whole GPU: ' }),
      `one ${largest.name} instance takes all ${table.memory_slices} memory and ${table.compute_slices} compute slices; for one service that is the same as MIG off (no partition to manage).`));
    return;
  }
  let cur = accepted.map((i) => ({ profile: i.profile, start: i.start }));
  const why = new Map();  // instance index -> why it stopped growing
  const steps = [];
  let last = null;
  for (let changed = true; changed;) {
    changed = false;
    for (let i = 0; i < cur.length; ++i) {
      const q = profile(cur[i].profile);
      if (!q || cur[i].start === null) { why.set(i, 'it has no start slot'); continue; }
      // Larger: no fewer memory or compute slices, more of one, and a placement at this start.
      const bigger = table.profiles.filter((p) => p.memory_slices >= q.memory_slices && p.compute_slices >= q.compute_slices
        && (p.memory_slices > q.memory_slices || p.compute_slices > q.compute_slices) && (p.placements || []).some((x) => x.start === cur[i].start))
        .sort((a, b) => a.compute_slices - b.compute_slices || a.memory_slices - b.memory_slices);
      if (!bigger.length) { why.set(i, `no larger profile starts at memory slice ${cur[i].start}`); continue; }
      let grew = false;
      for (const p of bigger) {
        const trial = cur.map((x, j) => (j === i ? { profile: p.name, start: x.start } : x));
        const r = await ask(trial);
        if (!r.ok) { why.set(i, r.error.message); break; }
        if (r.data.valid) { steps.push(`${cur[i].profile}@${cur[i].start} → ${p.name}@${cur[i].start}`); cur = trial; last = r.data; grew = changed = true; break; }
        why.set(i, `${p.name}@${cur[i].start}: ${r.data.reason || 'refused'}`);
      }
      if (grew) why.delete(i);
    }
  }
  if (!last) { const r = await ask(cur); last = r.ok ? r.data : null; }
  instances = cur;
  draw();
  await check();
  const usedMem = cur.reduce((a, i) => a + ((profile(i.profile) || {}).memory_slices || 0), 0);
  const usedCompute = cur.reduce((a, i) => a + ((profile(i.profile) || {}).compute_slices || 0), 0);
  const freeMem = table.memory_slices - usedMem, freeCompute = table.compute_slices - usedCompute;
  const stranded = last && last.stranded ? last.stranded : null;
  const left = freeMem || freeCompute ? `${freeMem} memory and ${freeCompute} compute slices are left free` : 'nothing is left free: the instances take the whole GPU';
  const strandedText = !stranded ? '' : stranded.memory_slices || stranded.compute_slices
    ? ` Stranded (no profile can use them in this layout): ${stranded.memory_slices} memory and ${stranded.compute_slices} compute slices${freeCompute === 0 && freeMem > 0 ? ', because every compute slice is taken' : freeMem === 0 && freeCompute > 0 ? ', because every memory slice is taken and an instance needs at least one' : ''}.`
    : freeMem || freeCompute ? ' None of it is stranded: another instance could still be placed there.' : '';
  clear(whole, el('p', { class: 'whole-answer' }, el('strong', { text: steps.length ? 'The whole GPU: ' : 'No instance can grow: ' }),
    steps.length ? `${steps.join(', ')}; ` : '', `${left}.`, strandedText),
  why.size ? el('ul', { class: 'whole-why' }, [...why.entries()].map(([i, w]) => el('li', {}, el('code', { text: `${cur[i].profile}@${cur[i].start}` }), ` stays: ${w}`))) : null);
}

// The fleet and requests editor (issue #18: "an inline editor for a fleet and requests with a
// filled-in example"): GPU models x counts, and per service a profile or a memory size x a count. Every
// edit packs again through POST /mig/pack (the same endpoint as the files below, sent as inline objects);
// a stale answer is dropped. The example: two A100-40GB and one A100-80GB for three services: "chat" by the
// profile of half the first GPU (its largest profile of at most HALF_GPU_SHARE of the whole-GPU profile's memory;
// on an A100-40GB the first such is 3g.20gb, read from the catalog, never written here), "embed" and "batch" by memory.
const EXAMPLE_FLEET = [{ target: 'a100-40gb-sxm4', count: 2 }, { target: 'a100-80gb-sxm4', count: 1 }];
const HALF_GPU_SHARE = 0.55;  // "half a GPU": memory at most 55% of the largest profile's (slices round up a little)
const EXAMPLE_REQUESTS = [
  { name: 'chat', by: 'profile', value: null, count: 2 },
  { name: 'embed', by: 'memory_gb', value: '8', count: 3 },
  { name: 'batch', by: 'memory_gb', value: '30', count: 1 },
];
const EDIT_DEBOUNCE_MS = 300;  // typing a count packs once, after the user pauses

function packSection(havePack, gpus = []) {
  const box = el('section', { class: 'pack', 'aria-labelledby': 'pack-h' }, el('h3', { id: 'pack-h', text: 'Pack a fleet' }));
  if (!havePack) { add(box, unavailable('Packing (POST /api/v1/mig/pack)')); return box; }
  const out = el('div', { class: 'pack-results', id: 'pack-results', 'aria-live': 'polite' });
  let seq = 0;
  const show = async (body) => {
    const mine = ++seq;
    clear(out, el('p', { class: 'status', text: 'Packing…' }));
    const r = await api('/mig/pack', body);
    if (mine !== seq) return;  // a later edit's answer is coming
    if (isUnavailable(r)) { clear(out, unavailable('Packing', r.error)); return; }
    if (!r.ok) { clear(out, errorBox(r.error)); return; }
    clear(out, ...packResult(r.data));
  };
  add(box, packEditor(gpus, show), packFiles(show), out);
  return box;
}

function packEditor(gpus, show) {
  const migGpus = gpus.filter((g) => g.mig && !g.mig_profile);
  // Profiles per GPU from the catalog's slice ids (`<gpu>/<profile>`, with memory_gb), for the suggestions.
  const profilesOf = new Map();
  for (const g of gpus) {
    if (!g.mig_profile || !g.id.includes('/')) continue;
    const at = g.id.indexOf('/');
    const parent = g.id.slice(0, at);
    if (!profilesOf.has(parent)) profilesOf.set(parent, []);
    profilesOf.get(parent).push({ name: g.id.slice(at + 1), memory_gb: g.memory_gb });
  }
  const halfOf = (target) => {
    const ps = profilesOf.get(target) || [];
    const whole = Math.max(0, ...ps.map((p) => p.memory_gb || 0));
    const fit = ps.filter((p) => p.memory_gb <= whole * HALF_GPU_SHARE);
    const best = Math.max(0, ...fit.map((p) => p.memory_gb));
    const p = fit.find((x) => x.memory_gb === best) || ps[0];
    return p ? p.name : '';
  };
  const fleetRows = el('div', { class: 'editor-rows', id: 'pack-fleet-rows' });
  const reqRows = el('div', { class: 'editor-rows', id: 'pack-request-rows' });
  const profileList = el('datalist', { id: 'pack-profile-options' });
  const keep = el('input', { type: 'checkbox', id: 'pack-edit-keep' });
  const problem = el('p', { class: 'layout-error', id: 'pack-edit-error', role: 'alert' });
  let rowId = 0;

  const suggestProfiles = () => {
    const names = new Set();
    for (const r of fleetRows.querySelectorAll('.fleet-row')) for (const p of profilesOf.get(r.querySelector('select').value) || []) names.add(p.name);
    clear(profileList, [...names].sort().map((n) => el('option', { value: n })));
  };
  const read = () => {
    const fleet = [...fleetRows.querySelectorAll('.fleet-row')].map((r) => ({
      target: r.querySelector('select').value, count: Number(r.querySelector('input').value) }));
    const requests = [...reqRows.querySelectorAll('.request-row')].map((r) => {
      const by = r.querySelector('select.request-by').value;
      const value = r.querySelector('input.request-value').value.trim();
      const line = { name: r.querySelector('input.request-name').value.trim(), count: Number(r.querySelector('input.request-count').value) };
      line[by] = by === 'memory_gb' ? Number(value) : value;
      return line;
    });
    return { fleet, requests };
  };
  // What the page can say before asking the server: an empty list or a count that is not a whole number
  // >= 1. Everything else (unknown profile, memory no instance holds) is the packer's answer.
  const whatIsWrong = ({ fleet, requests }) => {
    if (!fleet.length) return 'Add at least one GPU model to the fleet.';
    if (!requests.length) return 'Add at least one service.';
    for (const f of fleet) if (!Number.isInteger(f.count) || f.count < 1) return `${f.target}: the count must be a whole number of at least 1.`;
    for (const q of requests) {
      if (!q.name) return 'Every service needs a name.';
      if (!Number.isInteger(q.count) || q.count < 1) return `${q.name}: the count must be a whole number of at least 1.`;
      if ('memory_gb' in q && !(q.memory_gb > 0)) return `${q.name}: the memory must be a number of GB above 0.`;
      if ('profile' in q && !q.profile) return `${q.name}: choose a profile (e.g. 3g.20gb).`;
    }
    return '';
  };
  const pack = () => {
    const v = read();
    const wrong = whatIsWrong(v);
    problem.textContent = wrong;
    if (wrong) return;
    show({ fleet: { nodes: [{ name: 'fleet', gpus: v.fleet }] }, requests: { requests: v.requests }, keep_existing: keep.checked });
  };
  const later = debounce(pack, EDIT_DEBOUNCE_MS);
  const edited = () => { suggestProfiles(); later(); };

  const removeButton = (row, what) => el('button', { type: 'button', class: 'remove', 'aria-label': `Remove ${what}`, text: 'Remove',
    onclick: () => { row.remove(); edited(); } });
  const addFleetRow = ({ target, count }) => {
    const id = `pack-gpu-${++rowId}`;
    const select = el('select', { id, onchange: edited }, migGpus.map((g) => el('option', { value: g.id, text: g.name, selected: g.id === target })));
    const n = el('input', { type: 'number', id: `${id}-count`, min: '1', step: '1', value: String(count), 'aria-label': 'GPUs of this model', oninput: edited });
    const row = el('div', { class: 'editor-row fleet-row' }, el('label', { for: id, text: 'GPU ' }), select, ' × ', n);
    add(row, removeButton(row, 'this GPU model'));
    fleetRows.append(row);
  };
  const addRequestRow = ({ name, by, value, count }) => {
    const id = `pack-req-${++rowId}`;
    const nameIn = el('input', { id, class: 'request-name', value: name, size: '10', autocomplete: 'off', oninput: edited });
    const valueIn = el('input', { class: 'request-value', value, size: '9', autocomplete: 'off', 'aria-label': 'Profile or GB', oninput: edited });
    const setKind = (k) => {
      valueIn.setAttribute('list', k === 'profile' ? 'pack-profile-options' : '');
      valueIn.setAttribute('inputmode', k === 'profile' ? 'text' : 'decimal');
      valueIn.placeholder = k === 'profile' ? 'a profile of the list' : 'GB, e.g. 16';
    };
    const bySel = el('select', { class: 'request-by', 'aria-label': 'Sized by', onchange: () => { setKind(bySel.value); valueIn.value = ''; problem.textContent = ''; valueIn.focus(); } },
      el('option', { value: 'profile', text: 'profile', selected: by === 'profile' }), el('option', { value: 'memory_gb', text: 'memory (GB)', selected: by === 'memory_gb' }));
    setKind(by);
    const n = el('input', { type: 'number', class: 'request-count', min: '1', step: '1', value: String(count), 'aria-label': 'Instances', oninput: edited });
    const row = el('div', { class: 'editor-row request-row' }, el('label', { for: id, text: 'Service ' }), nameIn, ' ', bySel, ' ', valueIn, ' × ', n);
    add(row, removeButton(row, `service ${name || ''}`.trim()));
    reqRows.append(row);
  };
  for (const f of EXAMPLE_FLEET) if (migGpus.some((g) => g.id === f.target)) addFleetRow(f);
  if (!fleetRows.children.length && migGpus.length) addFleetRow({ target: migGpus[0].id, count: 1 });
  const first = fleetRows.querySelector('select');
  for (const q of EXAMPLE_REQUESTS) addRequestRow({ ...q, value: q.value ?? halfOf(first ? first.value : '') });
  keep.addEventListener('change', pack);
  const editor = el('div', { class: 'pack-editor', id: 'pack-editor' },
    el('p', { text: 'Edit the fleet and the services; the plan below follows every change. The example: two A100-40GB and one A100-80GB for three services.' }),
    el('h4', { text: 'Fleet' }), fleetRows,
    el('p', {}, el('button', { type: 'button', id: 'pack-add-gpu', text: 'Add a GPU model', onclick: () => { addFleetRow({ target: migGpus[0] ? migGpus[0].id : '', count: 1 }); edited(); } })),
    el('h4', { text: 'Services' }), reqRows, profileList,
    el('p', {}, el('button', { type: 'button', id: 'pack-add-request', text: 'Add a service', onclick: () => { addRequestRow({ name: `service-${rowId + 1}`, by: 'memory_gb', value: '8', count: 1 }); edited(); } }), ' ',
      el('label', { class: 'check' }, keep, ' Keep busy instances where they are')),
    problem);
  suggestProfiles();
  queueMicrotask(pack);  // the example's answer, at once
  return editor;
}

function packFiles(show) {
  const fleet = el('input', { type: 'file', id: 'pack-fleet', accept: '.yaml,.yml,.json' });
  const reqs = el('input', { type: 'file', id: 'pack-requests', accept: '.yaml,.yml,.json' });
  const keep = el('input', { type: 'checkbox', id: 'pack-keep' });
  const note = el('p', { class: 'status', id: 'pack-files-note' });
  const run = async () => {
    if (!fleet.files[0] || !reqs.files[0]) { note.textContent = 'Choose a fleet file and a requests file.'; return; }
    note.textContent = '';
    show({ fleet: await readFile(fleet.files[0]), requests: await readFile(reqs.files[0]),
      keep_existing: keep.checked, export: 'mig-parted' });
  };
  return el('details', { class: 'pack-files' }, el('summary', { text: 'Or pack from files (with a mig-parted config to download)' }),
    el('p', { text: 'The fleet file lists nodes and their GPUs (and the instances that exist); the requests file lists what tenants need. Both are read here in the browser and sent inline; nothing is stored.' }),
    el('form', { class: 'pack-form', onsubmit: (e) => { e.preventDefault(); run(); } },
      el('label', { for: 'pack-fleet', text: 'Fleet file ' }), fleet, ' ',
      el('label', { for: 'pack-requests', text: 'Requests file ' }), reqs, ' ',
      el('label', { class: 'check' }, keep, ' Keep busy instances where they are'), ' ',
      el('button', { type: 'submit', text: 'Pack' })),
    note);
}

function packResult(d) {
  const out = [el('p', { class: 'pack-summary' }, el('strong', { text: `${fmt(d.gpus_used)} GPUs used` }),
    d.lower_bound !== undefined ? ` (lower bound ${fmt(d.lower_bound)})` : '',
    d.disturbed !== undefined ? `; moves ${fmt(d.disturbed)} running instance${d.disturbed === 1 ? '' : 's'}` : '',
    d.disturbed > 0 && d.disturbed_lower_bound !== undefined ? ` (no plan on this many GPUs moves fewer than ${fmt(d.disturbed_lower_bound)})` : '',
    d.stranded ? `; stranded ${fmt(d.stranded.memory_slices)} memory and ${fmt(d.stranded.compute_slices)} compute slices` : '')];
  if (d.export && d.export.text) {
    out.push(el('p', {}, el('button', { type: 'button', class: 'download', text: 'Download the mig-parted config',
      onclick: () => download('mig-parted-config.yaml', d.export.text, 'application/yaml') })));
  }
  out.push(el('div', { class: 'table-wrap' }, labelCells(el('table', { class: 'data pack-table' },
    el('caption', { text: 'Layout of every GPU' }),
    el('thead', {}, el('tr', {}, ['Node', 'GPU', 'Target', 'Layout (profile@start: request)'].map((h) => el('th', { scope: 'col', text: h })))),
    el('tbody', {}, (d.gpus || []).map((g) => el('tr', {},
      el('th', { scope: 'row', text: g.node }), el('td', { class: 'num', text: fmt(g.index) }), el('td', { text: g.target }),
      el('td', {}, (g.layout || []).length ? el('ul', { class: 'plain' }, g.layout.map((i) => el('li', {},
        el('code', { text: `${i.profile}@${i.start}` }), i.request ? `: ${i.request}` : '', i.busy ? ' (busy)' : '', i.existing ? ' (existing)' : '')))
        : el('span', { class: 'muted', text: 'empty' })))))))));
  // What an operator runs: per GPU, the instances to destroy and to create (busy ones never without need).
  const changes = (d.reconfigurations || []).filter((r) => (r.destroy || []).length || (r.create || []).length);
  if (changes.length) {
    const list = (xs) => (xs || []).map((i) => `${i.profile}@${i.start}`).join(', ') || '—';
    out.push(el('div', { class: 'table-wrap' }, labelCells(el('table', { class: 'data pack-changes' },
      el('caption', { text: `Changes on ${fmt(changes.length)} GPU${changes.length === 1 ? '' : 's'}` }),
      el('thead', {}, el('tr', {}, ['Node', 'GPU', 'Destroy', 'Create'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, changes.map((r) => el('tr', {},
        el('th', { scope: 'row', text: r.node }), el('td', { class: 'num', text: fmt(r.index) }),
        el('td', {}, el('code', { text: list(r.destroy) })), el('td', {}, el('code', { text: list(r.create) })))))))));
  }
  if ((d.unplaced || []).length) {
    out.push(el('h4', { text: 'Not placed' }), el('ul', {}, d.unplaced.map((u) => el('li', { text: `${u.request} × ${u.count}: ${u.reason}` }))));
  }
  return out;
}

// The MIG diagram without the editing: a GPU's memory slices in a row and the given blocks drawn over
// the slices they take (the same grid and instance marks as the editor above). Used by the Rent tab (the
// slice an offer sells) and the Provider tab (who holds which slice). blocks: [{name, detail, start,
// size, free}] with start and size in memory slices.
export function sliceDiagram(memorySlices, blocks, label) {
  const n = Math.max(1, memorySlices);
  const grid = el('div', { class: 'mig-grid slice-view', role: 'img', 'aria-label': label });
  grid.style.gridTemplateColumns = `repeat(${n}, minmax(0, 1fr))`;
  blocks.forEach((b, idx) => {
    const start = Math.min(Math.max(0, b.start || 0), n - 1);
    const span = Math.max(1, Math.min(b.size || 1, n - start));
    const d = el('div', { class: `instance inst-${idx % 8}${b.free ? ' free-slice' : ''}`, title: b.title || undefined },
      el('span', { class: 'inst-name', text: b.name }), b.detail ? el('span', { class: 'inst-detail', text: b.detail }) : null);
    d.style.gridRow = '1';
    d.style.gridColumn = `${start + 1} / span ${span}`;
    grid.append(d);
  });
  for (let s = 0; s < n; ++s) {
    const taken = blocks.some((b) => !b.free && s >= b.start && s < b.start + b.size);
    const c = el('span', { class: `slot${taken ? ' used' : ''}`, 'aria-hidden': 'true', text: `${s}` });
    c.style.gridRow = '2';
    c.style.gridColumn = `${s + 1}`;
    grid.append(c);
  }
  return grid;
}
