// Provider: sign in with a provider's token; earnings and utilisation (the share of GPU-hours rented
// over the last day and week); nodes and their GPUs, each drawn with its MIG layout and which tenant
// (an opaque id) holds which slice; add and drain (or remove) a node; publish and withdraw offers with
// a preview of how many units each GPU's layout yields.
import { add, api, clear, dollars, el, errorSlot, fmt, gpuDetail, gpuList, labelCells, liveStatus, signInBox, token, vocabulary, words } from './ui.js';
import { sliceDiagram } from './mig.js';

// Utilisation windows: the last day and the last week, in seconds.
const DAY_SECONDS = 24 * 3600;
const WEEK_SECONDS = 7 * DAY_SECONDS;
// GPUs per rental unit a whole-GPU offer may bundle on one node (market.h: 1, 2, 4 or 8).
const UNIT_GPUS = [1, 2, 4, 8];
// The MIG policy that sells any valid layout (market.h MigPolicy::kDynamic, GET /vocabulary
// mig_policy); a fixed layout is a GPU's `layout`, and the other policy sells whole GPUs only.
const MIG_ANY_LAYOUT = 'dynamic';

let vocab, summary, nodesBox, nodesStatus, nodesError, offersBox, offersError, publishForm, preview, publishStatus, publishError, addForm, addError;
let nodes = [], live = [], earnings = null, myOffers = [], providerId = '';
const layoutsCache = new Map();

export async function init(panel) {
  vocab = await vocabulary();
  summary = el('div', { class: 'provider-summary', 'aria-live': 'polite' });
  nodesStatus = liveStatus();
  nodesError = errorSlot('nodes-error');
  nodesBox = el('div', { class: 'provider-nodes' });
  offersError = errorSlot('offers-error');
  offersBox = el('div', { class: 'table-wrap provider-offers' });
  add(panel,
    el('h2', { text: 'Provide GPUs' }),
    el('p', { class: 'lead', text: 'Your nodes and what is rented on them now, what you earned, and your offers. Renters are shown by tenant id only.' }),
    signInBox('prov', () => load()),
    el('p', {}, el('button', { type: 'button', id: 'prov-refresh', text: 'Refresh', onclick: () => load() }), nodesError.node),
    summary,
    el('section', { 'aria-labelledby': 'prov-nodes-h' }, el('h3', { id: 'prov-nodes-h', text: 'Nodes and GPUs' }), nodesStatus, nodesBox, await addNodeForm()),
    el('section', { 'aria-labelledby': 'prov-offers-h' }, el('h3', { id: 'prov-offers-h', text: 'Offers' }), offersError.node, offersBox, await publishSection()));
  await load();
}

export async function route() {
  if (nodesBox && token()) await load();
}

async function load() {
  if (!token()) {
    nodes = []; live = []; earnings = null; myOffers = [];
    clear(summary);
    clear(nodesBox, el('p', { class: 'muted', text: 'Sign in with a provider\'s token to see your nodes.' }));
    clear(offersBox);
    nodesStatus.textContent = '';
    return;
  }
  nodesStatus.textContent = 'Loading…';
  const [nr, rr, er, or] = await Promise.all([api('/nodes', undefined, { auth: true }), api('/provider/rentals', undefined, { auth: true }),
    api('/provider/earnings', undefined, { auth: true }), api('/offers?source=market')]);
  if (!nr.ok) { nodesError.show(nr.error); nodesStatus.textContent = 'Not loaded: see the error beside Refresh.'; return; }
  nodesError.clear();
  nodes = nr.data.nodes || [];
  live = rr.ok ? (rr.data.rentals || []).filter((x) => (x.placements || []).length > 0) : [];
  earnings = er.ok ? er.data : null;
  providerId = earnings ? earnings.provider_id : providerId;
  myOffers = or.ok ? (or.data.offers || []).filter((o) => o.source === 'market' && o.provider_id === providerId) : [];
  const gpuCount = nodes.reduce((a, n) => a + (n.gpus || []).length, 0);
  nodesStatus.textContent = `${nodes.length} node${nodes.length === 1 ? '' : 's'}, ${gpuCount} GPUs, ${live.length} live rental${live.length === 1 ? '' : 's'}.`;
  await drawSummary(rr.ok ? rr.data.rentals || [] : [], gpuCount);
  await drawNodes();
  drawOffers();
  updatePreview();
}

// The share of a GPU one rental unit takes: a whole-GPU offer's GPUs, a MIG profile's memory slices
// over the GPU's.
async function unitShare(rental) {
  const [gpu, profile] = String(rental.target || '').split('/');
  if (profile) {
    const d = await gpuDetail(gpu);
    const p = d && d.mig && (d.mig.profiles || []).find((x) => x.name === profile);
    return p ? p.memory_slices / d.mig.memory_slices : 0;
  }
  const o = myOffers.find((x) => x.id === rental.offer);
  if (o) return o.gpus;
  return (rental.placements || []).length ? rental.placements.length / Math.max(1, rental.count) : 1;
}

// Utilisation over a window: GPU-seconds rented while running (the usage segments) over the window
// times today's GPUs.
function utilisation(rentalsById, shares, windowSeconds, gpuCount) {
  if (!earnings || gpuCount === 0) return null;
  const now = Date.now(), from = now - windowSeconds * 1000;
  let used = 0;
  for (const u of earnings.rentals || []) {
    const x = rentalsById.get(u.rental_id);
    if (!x) continue;
    for (const s of u.segments || []) {
      const a = Math.max(from, s.started_at_ms), b = Math.min(now, s.ended_at_ms ?? now);
      if (b > a) used += ((b - a) / 1000) * shares.get(x.id) * x.count;
    }
  }
  return used / (windowSeconds * gpuCount);
}

async function drawSummary(all, gpuCount) {
  const byId = new Map(all.map((x) => [x.id, x]));
  const shares = new Map(await Promise.all(all.map(async (x) => [x.id, await unitShare(x)])));
  // Shares under a hundredth of a percent read as such, not as 1.6e-4%.
  const pct = (v) => (v === null ? '–' : v > 0 && v < 1e-4 ? 'under 0.01%' : `${fmt(v * 100, 3)}%`);
  clear(summary, el('dl', { class: 'facts provider-facts' },
    el('dt', { text: 'Earnings' }), el('dd', { id: 'prov-earnings', text: earnings ? `${dollars(earnings.earnings, 6)} over ${fmt((earnings.rentals || []).length)} rentals` : '–' }),
    el('dt', { text: 'Utilisation, last day' }), el('dd', { id: 'prov-util-day', text: pct(utilisation(byId, shares, DAY_SECONDS, gpuCount)) }),
    el('dt', { text: 'Utilisation, last week' }), el('dd', { id: 'prov-util-week', text: pct(utilisation(byId, shares, WEEK_SECONDS, gpuCount)) })),
  el('p', { class: 'hint', text: 'Utilisation: GPU-hours rented while running (a MIG slice counts its share of the memory slices) over the window times your GPUs today.' }));
}

// Blocks of one GPU's diagram: what live rentals hold (tenant id shown) and, on a static layout, the
// instances still free.
function blocksOf(g, table) {
  const held = [];
  for (const x of live) {
    for (const p of x.placements || []) {
      if (p.gpu_id !== g.id) continue;
      held.push({ name: p.profile || 'whole GPU', detail: `tenant ${x.tenant_id}`, start: p.start, size: p.size, title: `${x.id} of tenant ${x.tenant_id}` });
    }
  }
  if (g.layout && table) {
    for (const item of g.layout.split(',')) {
      const [profile, at] = item.split('@');
      const q = (table.profiles || []).find((x) => x.name === profile);
      const start = Number(at);
      if (!q || !Number.isInteger(start)) continue;
      if (held.some((h) => h.start === start)) continue;
      held.push({ name: profile, detail: 'free', start, size: q.memory_slices, free: true });
    }
  }
  return held.sort((a, b) => a.start - b.start);
}

async function drawNodes() {
  if (!nodes.length) { clear(nodesBox, el('p', { class: 'muted', text: 'No nodes yet: add one below.' })); return; }
  const cards = [];
  for (const n of nodes) {
    const slot = errorSlot(`node-error-${n.id}`);
    const act = (label, path, method) => el('button', { type: 'button', class: `node-${label.toLowerCase()}`, text: label, 'aria-label': `${label} ${n.name}`,
      onclick: async (e) => {
        const b = e.currentTarget;  // null once the event is dispatched: keep the button
        b.disabled = true;
        const r = await api(`/nodes/${encodeURIComponent(n.id)}${path}`, undefined, { auth: true, method });
        if (!r.ok) { b.disabled = false; slot.show(r.error); return; }
        await load();
      } });
    const gpus = [];
    for (const g of n.gpus || []) {
      const d = g.layout ? await gpuDetail(g.target) : null;
      const table = d && d.mig ? d.mig : null;
      const slices = g.memory_slices || 1;
      const blocks = blocksOf(g, table);
      gpus.push(el('li', { class: 'provider-gpu', 'data-gpu': g.id },
        el('p', { class: 'gpu-line' }, el('strong', { text: `GPU ${g.index}` }), ` ${g.target} · MIG ${g.mig}${g.layout ? ` (${g.layout})` : ''} · `,
          el('span', { class: 'claimed', text: `${fmt(g.claimed_slices)} of ${fmt(g.memory_slices)} slices rented` })),
        sliceDiagram(slices, blocks, `${g.target} GPU ${g.index}: ${blocks.filter((b) => !b.free).map((b) => `${b.name} at ${b.start} held by ${b.detail}`).join('; ') || 'nothing rented'}`)));
    }
    cards.push(el('article', { class: 'node-card', 'data-node': n.id },
      el('h4', { text: n.name }),
      el('p', {}, `${n.region} · ${n.interconnect} · ${fmt(n.vcpus)} vCPUs, ${fmt(n.ram_gb)} GB RAM · `, el('span', { class: 'node-state', text: n.state }),
        ` · ${fmt(n.live_rentals)} live rentals `, act('Drain', '/drain', 'POST'), ' ', act('Remove', '', 'DELETE'), slot.node),
      el('ul', { class: 'plain gpu-list' }, gpus)));
  }
  clear(nodesBox, ...cards);
}

async function addNodeForm() {
  addError = errorSlot('node-add-error');
  const gpus = (await gpuList()).filter((g) => !g.mig_profile);
  const opt = (list, selected) => list.map((w) => el('option', { value: w, text: w, selected: w === selected || undefined }));
  const num = (id, value, min = 0) => el('input', { type: 'number', id, value, min, step: 1 });
  addForm = el('form', { class: 'workload add-node', 'aria-label': 'Add a node', onsubmit: (e) => { e.preventDefault(); addNode(); } },
    el('fieldset', {}, el('legend', { text: 'Add a node' }),
      el('label', {}, 'Name ', el('input', { id: 'node-name', autocomplete: 'off' })),
      el('label', {}, 'Region ', el('input', { id: 'node-region', autocomplete: 'off' })),
      el('label', {}, 'Interconnect ', el('select', { id: 'node-interconnect' }, opt(words(vocab, 'interconnect')))),
      el('label', {}, 'vCPUs ', num('node-vcpus', 32, 1)), el('label', {}, 'RAM (GB) ', num('node-ram', 256, 1)), el('label', {}, 'Disk (GB) ', num('node-disk', 1000, 1)),
      el('label', {}, 'GPU ', el('select', { id: 'node-gpu' }, gpus.map((g) => el('option', { value: g.id, text: g.name })))),
      el('label', {}, 'How many ', num('node-count', 1, 1)),
      el('label', {}, 'MIG ', el('select', { id: 'node-mig' }, opt(words(vocab, 'mig_policy')))),
      el('label', {}, 'UUID prefix ', el('input', { id: 'node-uuid', placeholder: 'GPU-…', autocomplete: 'off' })),
      el('p', { class: 'hint', text: 'Each GPU gets the UUID prefix and its index (as nvidia-smi -L prints them: give the real ones\' common prefix).' })),
    el('button', { type: 'submit', id: 'node-add', text: 'Add node' }), addError.node);
  return addForm;
}

async function addNode() {
  const v = (id) => addForm.querySelector(`#${id}`).value.trim();
  const count = Math.max(1, Math.min(16, Number(v('node-count')) || 1));
  const prefix = v('node-uuid') || `GPU-${v('node-name')}-`;
  const body = { name: v('node-name'), region: v('node-region'), interconnect: v('node-interconnect'), vcpus: Number(v('node-vcpus')),
    ram_gb: Number(v('node-ram')), disk_gb: Number(v('node-disk')),
    gpus: Array.from({ length: count }, (_, i) => ({ target: v('node-gpu'), uuid: `${prefix}${i}`, mig: v('node-mig') })) };
  const r = await api('/nodes', body, { auth: true });
  if (!r.ok) { addError.show(r.error); return; }
  addError.clear();
  await load();
}

function drawOffers() {
  if (!myOffers.length) { clear(offersBox, el('p', { class: 'muted', text: 'No offers published.' })); return; }
  clear(offersBox, labelCells(el('table', { class: 'data my-offers' },
    el('caption', { text: 'Your live offers: available counts what can be placed now' }),
    el('thead', {}, el('tr', {}, ['Offer', 'Target', 'GPUs per unit', 'Region', 'Per hour', 'Available', ''].map((h) => el('th', { scope: 'col', text: h })))),
    el('tbody', {}, myOffers.map((o) => {
      const slot = errorSlot(`offer-error-${o.id}`);
      return el('tr', { 'data-offer': o.id, 'data-target': o.target },
        el('th', { scope: 'row' }, el('code', { text: o.id }), o.demo ? el('span', { class: 'demo-badge', text: 'demo data' }) : null),
        el('td', { text: o.target }), el('td', { class: 'num', text: fmt(o.gpus) }), el('td', { text: o.region }),
        el('td', { class: 'num', text: dollars(o.price_per_hour) }), el('td', { class: 'num offer-available', text: fmt(o.available) }),
        el('td', {}, el('button', { type: 'button', class: 'offer-withdraw', text: 'Withdraw', 'aria-label': `Withdraw ${o.id}`,
          onclick: async (e) => {
            const b = e.currentTarget;  // null once the event is dispatched: keep the button
            b.disabled = true;
            const r = await api(`/offers/${encodeURIComponent(o.id)}`, undefined, { auth: true, method: 'DELETE' });
            if (!r.ok) { b.disabled = false; slot.show(r.error); return; }
            await load();
          } }), slot.node));
    })))));
}

async function publishSection() {
  publishError = errorSlot('offer-publish-error');
  publishStatus = liveStatus();
  publishStatus.id = 'offer-publish-status';
  preview = el('div', { class: 'offer-preview', id: 'offer-preview', 'aria-live': 'polite' });
  const gpuSel = el('select', { id: 'offer-gpu' });
  const profileSel = el('select', { id: 'offer-profile' });
  const fillProfiles = async () => {
    const d = gpuSel.value ? await gpuDetail(gpuSel.value) : null;
    const keep = profileSel.value;
    clear(profileSel, el('option', { value: '', text: 'whole GPU' }),
      ((d && d.mig && d.mig.profiles) || []).map((p) => el('option', { value: p.name, text: `${p.name} (${p.memory_slices} of ${d.mig.memory_slices} memory slices)` })));
    if ([...profileSel.options].some((o) => o.value === keep)) profileSel.value = keep;
    updatePreview();
  };
  gpuSel.addEventListener('change', fillProfiles);
  profileSel.addEventListener('change', () => updatePreview());
  publishForm = el('form', { class: 'workload publish', 'aria-label': 'Publish an offer', onsubmit: (e) => { e.preventDefault(); publish(); } },
    el('fieldset', {}, el('legend', { text: 'Publish an offer' }),
      el('label', {}, 'GPU ', gpuSel), el('label', {}, 'Slice ', profileSel),
      el('label', {}, 'GPUs per unit ', el('select', { id: 'offer-units', onchange: () => updatePreview() }, UNIT_GPUS.map((n) => el('option', { value: n, text: String(n) })))),
      el('label', {}, 'Region ', el('input', { id: 'offer-region', autocomplete: 'off' })),
      el('label', {}, 'Price per hour ($) ', el('input', { type: 'number', id: 'offer-price', min: 0, step: 'any', value: '' })),
      el('label', {}, 'Minimum billed (s) ', el('input', { type: 'number', id: 'offer-min', min: 0, step: 1, value: 0 })),
      preview),
    el('button', { type: 'submit', id: 'offer-publish', text: 'Publish' }), publishError.node, publishStatus);
  publishForm.fillProfiles = fillProfiles;
  return publishForm;
}

// The GPU types of the provider's inventory, for the publish form (kept when they do not change).
async function syncPublishGpus() {
  const sel = publishForm.querySelector('#offer-gpu');
  const types = [...new Set(nodes.flatMap((n) => (n.gpus || []).map((g) => g.target)))];
  const have = [...sel.options].map((o) => o.value);
  if (types.join() !== have.join()) {
    const keep = sel.value;
    clear(sel, types.map((t) => el('option', { value: t, text: t })));
    if (types.includes(keep)) sel.value = keep;
    await publishForm.fillProfiles();
  }
  const region = publishForm.querySelector('#offer-region');
  if (!region.value && nodes[0]) region.value = nodes[0].region;
}

// The most instances of `profile` any valid layout of the GPU holds (GET /mig/{gpu}/layouts).
async function maxPerGpu(gpu, profile) {
  if (!layoutsCache.has(gpu)) layoutsCache.set(gpu, api(`/mig/${encodeURIComponent(gpu)}/layouts`));
  const r = await layoutsCache.get(gpu);
  if (!r.ok) { layoutsCache.delete(gpu); return 0; }  // asked again next time: a dropped connection is not an answer
  return Math.max(0, ...(r.data.layouts || []).map((l) => l.filter((i) => i.profile === profile).length));
}

// How many units the offer would sell on today's inventory, per GPU layout: a dynamic GPU the most
// any valid layout holds, a static one the instances of its layout, none without MIG; whole GPUs
// whole units per node.
let previewSeq = 0;
async function updatePreview() {
  if (!publishForm) return;
  const seq = ++previewSeq;
  if (nodes.length) await syncPublishGpus();
  const gpu = publishForm.querySelector('#offer-gpu').value;
  const profile = publishForm.querySelector('#offer-profile').value;
  const per = Number(publishForm.querySelector('#offer-units').value) || 1;
  if (!gpu) { clear(preview, el('p', { class: 'hint', text: 'Add a node first: an offer sells its GPUs.' })); return; }
  const lines = [];
  let total = 0;
  if (profile) {
    const dyn = await maxPerGpu(gpu, profile);
    const groups = new Map();
    for (const n of nodes) {
      for (const g of n.gpus || []) {
        if (g.target !== gpu) continue;
        // A fixed layout sells its instances of the profile; a GPU with MIG but no fixed layout any valid one.
        const k = g.layout ? `${g.mig}: ${g.layout}` : g.mig;
        const each = g.layout ? g.layout.split(',').filter((i) => i.split('@')[0] === profile).length : g.mig === MIG_ANY_LAYOUT ? dyn : 0;
        const e = groups.get(k) || { gpus: 0, each };
        e.gpus += 1;
        groups.set(k, e);
      }
    }
    for (const [k, e] of groups) {
      total += e.gpus * e.each;
      lines.push(`${e.gpus} GPU${e.gpus === 1 ? '' : 's'} with MIG ${k}: ${e.each} × ${profile} each = ${e.gpus * e.each}`);
    }
  } else {
    for (const n of nodes) {
      const c = (n.gpus || []).filter((g) => g.target === gpu).length;
      if (!c) continue;
      total += Math.floor(c / per);
      lines.push(`${n.name}: ${c} GPU${c === 1 ? '' : 's'} = ${Math.floor(c / per)} unit${Math.floor(c / per) === 1 ? '' : 's'} of ${per}`);
    }
  }
  if (seq !== previewSeq) return;
  clear(preview, el('p', { class: 'preview-total' }, el('strong', { text: `Yields ${fmt(total)} unit${total === 1 ? '' : 's'}` }), ` of ${profile ? `${gpu}/${profile}` : `${per} × ${gpu}`} on your inventory (before what is rented now):`),
    el('ul', { class: 'preview-lines' }, lines.map((t) => el('li', { text: t }))));
}

async function publish() {
  const v = (id) => publishForm.querySelector(`#${id}`).value.trim();
  const target = v('offer-profile') ? `${v('offer-gpu')}/${v('offer-profile')}` : v('offer-gpu');
  const body = { target, region: v('offer-region'), price_per_hour: v('offer-price') === '' ? 0 : Number(v('offer-price')),
    min_billable_seconds: Number(v('offer-min')) || 0 };
  if (!v('offer-profile')) body.gpus = Number(v('offer-units')) || 1;
  const r = await api('/offers', body, { auth: true });
  if (!r.ok) { publishError.show(r.error); return; }
  publishError.clear();
  publishStatus.textContent = `Published ${r.data.id}: ${r.data.target} at ${dollars(r.data.price_per_hour)}/h, ${fmt(r.data.available)} available now.`;
  await load();
}
