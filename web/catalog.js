// Catalog: a filterable, sortable table of GPUs and MIG slices, and a page per GPU or slice with
// every figure, what it means, its source and date, how it was derived and the conflicting claims.
import { add, api, clear, el, errorBox, fmt, label, labelCells, liveStatus, safeUrl, sortableTable } from './ui.js';

let rows = [];
let listView, detailView, tableBox, status;
const filters = { text: '', arch: '', minMem: 0, mig: false, slices: false };

export async function init(panel) {
  listView = el('div', { class: 'catalog-list' });
  detailView = el('div', { class: 'catalog-detail', hidden: true });
  status = liveStatus();
  const archSelect = el('select', { id: 'cat-arch', onchange: (e) => { filters.arch = e.target.value; draw(); } },
    el('option', { value: '', text: 'any' }));
  add(listView, 
    el('h2', { text: 'GPU catalog' }),
    el('p', { class: 'lead', text: 'Every GPU and MIG slice gpuplan knows. Throughput is dense (no 2:4 sparsity), per device. Open a row for every figure with its source.' }),
    el('form', { class: 'filters', role: 'search', 'aria-label': 'Filter the catalog', onsubmit: (e) => e.preventDefault() },
      el('label', {}, 'Search ', el('input', { type: 'search', id: 'cat-search', placeholder: 'h100, hopper, pcie…',
        oninput: (e) => { filters.text = e.target.value.toLowerCase(); draw(); } })),
      el('label', {}, 'Architecture ', archSelect),
      el('label', {}, 'Memory at least (GB) ', el('input', { type: 'number', id: 'cat-minmem', min: 0, step: 1, value: 0, inputmode: 'numeric',
        oninput: (e) => { filters.minMem = Number(e.target.value) || 0; draw(); } })),
      el('label', { class: 'check' }, el('input', { type: 'checkbox', id: 'cat-mig', onchange: (e) => { filters.mig = e.target.checked; draw(); } }), ' MIG-capable only'),
      el('label', { class: 'check' }, el('input', { type: 'checkbox', id: 'cat-slices', onchange: (e) => { filters.slices = e.target.checked; draw(); } }), ' Show MIG slices')),
    status,
    tableBox = el('div', { class: 'table-wrap' }));
  add(panel, listView, detailView);
  const r = await api('/gpus?include_mig=true');
  if (!r.ok) {
    add(tableBox, errorBox(r.error));
    return;
  }
  rows = r.data.gpus;
  for (const a of [...new Set(rows.map((g) => g.architecture))]) archSelect.append(el('option', { value: a, text: a }));
  draw();
}

function draw() {
  const shown = rows.filter((g) => {
    if (!filters.slices && g.mig_profile) return false;
    if (filters.mig && !g.mig) return false;
    if (filters.arch && g.architecture !== filters.arch) return false;
    if ((g.memory_gb || 0) < filters.minMem) return false;
    if (filters.text && !`${g.id} ${g.name} ${g.architecture} ${g.form_factor} ${g.vendor}`.toLowerCase().includes(filters.text)) return false;
    return true;
  });
  status.textContent = `${shown.length} of ${rows.filter((g) => filters.slices || !g.mig_profile).length} shown.`;
  clear(tableBox, sortableTable([
    { key: 'name', label: 'GPU', render: (g) => el('a', { href: `#/gpu/${g.id}`, text: g.name }) },
    { key: 'architecture', label: 'Architecture' },
    { key: 'form_factor', label: 'Form' },
    { key: 'memory_gb', label: 'Memory (GB)', num: true },
    { key: 'memory_bandwidth_gbps', label: 'Bandwidth (GB/s)', num: true },
    { key: 'bf16_tensor_tflops', label: 'BF16 (TFLOPS)', num: true },
    { key: 'fp8_tensor_tflops', label: 'FP8 (TFLOPS)', num: true },
    { key: 'tdp_w', label: 'Power (W)', num: true },
    { key: 'mig', label: 'MIG', render: (g) => (g.mig_profile ? 'slice' : g.mig ? 'yes' : 'no') },
  ], shown, { caption: 'GPUs: select a column heading to sort', sortKey: 'name', rowAttrs: (g) => ({ 'data-id': g.id }) }));
}

export async function route(panel, r) {
  if (!r.gpu) {
    listView.hidden = false;
    detailView.hidden = true;
    return;
  }
  listView.hidden = true;
  detailView.hidden = false;
  clear(detailView, el('p', { class: 'status', role: 'status', text: `Loading ${r.gpu}…` }));
  const res = await api(`/gpus/${r.gpu.split('/').map(encodeURIComponent).join('/')}?explain=true`);
  clear(detailView, el('p', {}, el('a', { href: '#/catalog', class: 'back', text: '← All GPUs' })));
  if (!res.ok) {
    add(detailView, errorBox(res.error));
    return;
  }
  add(detailView, ...gpuPage(res.data));
  const h = detailView.querySelector('h2');
  if (h) h.focus();
}

// What the server's market has of this GPU or slice now (issue #14: `available_now`, count and lowest
// price per hour per region), or "not available now" with when it last was. Said only where the
// server answers the field (an older server, or one without a market, does not).
// TODO(lead, #14 h-mplan): the field's shape is read tolerantly (a list of {region, count, price_per_hour}
// or an object by region; last_available_at_ms beside it); keep one once the back end has landed.
function availableNow(g) {
  if (!g || !Object.prototype.hasOwnProperty.call(g, 'available_now')) return null;
  const a = g.available_now;
  const list = Array.isArray(a) ? a : a && Array.isArray(a.regions) ? a.regions
    : a && typeof a === 'object' ? Object.entries(a).filter(([, v]) => v && typeof v === 'object').map(([region, v]) => ({ region, ...v })) : [];
  const count = (x) => Number(x.count ?? x.available ?? 0);
  const price = (x) => x.lowest_price_per_hour ?? x.min_price_per_hour ?? x.price_per_hour;
  const live = list.filter((x) => count(x) > 0);
  const last = g.last_available_at_ms ?? (a && !Array.isArray(a) ? a.last_available_at_ms : undefined);
  if (!live.length) {
    return el('p', { class: 'available-now none', role: 'status' }, el('strong', { text: 'Not available now' }),
      typeof last === 'number' ? ` (last available ${new Date(last).toISOString().replace('T', ' ').slice(0, 16)} UTC)` : '', '.');
  }
  return el('div', { class: 'available-now' }, el('strong', { text: 'Available now on this server\'s market: ' }),
    el('ul', { class: 'plain' }, live.map((x) => el('li', {}, `${x.region || 'any region'}: ${fmt(count(x))} available`,
      typeof price(x) === 'number' ? ` from $${price(x).toFixed(2)} per hour` : ''))),
    el('a', { class: 'button', href: '#/rent', text: 'Rent: the live offers where your model fits' }));
}

function gpuPage(g) {
  const facts = [['Id', g.id], ['Vendor', g.vendor], ['Architecture', g.architecture], ['Chip', g.chip],
    ['Form factor', g.form_factor], ['Host interface', g.interface], ['Lifecycle', g.lifecycle],
    ['Also known as', (g.aliases || []).join('; ')], ['Data file', g.data_file]];
  const out = [
    el('h2', { tabindex: -1, text: g.name }),
    g.parent ? el('p', {}, 'A MIG slice of ', el('a', { href: `#/gpu/${g.parent}`, text: g.parent }), '. Memory and SMs come from the MIG table; bandwidth and throughput are the slice\'s share of the parent, marked derived.') : null,
    el('dl', { class: 'facts' }, facts.filter(([, v]) => v).map(([k, v]) => [el('dt', { text: k }), el('dd', { text: v })])),
    availableNow(g),
    el('p', { class: 'actions' },
      el('a', { class: 'button', href: `#/compare?gpu=${encodeURIComponent(g.id)}`, text: 'Compare with others' }), ' ',
      el('a', { class: 'button', href: `#/fit?gpu=${encodeURIComponent(g.id)}`, text: 'What fits on it?' }),
      g.mig ? [' ', el('a', { class: 'button', href: `#/mig?gpu=${encodeURIComponent(g.id)}`, text: 'Build a MIG layout' })] : null),
    el('h3', { text: 'Figures' }),
    el('p', { class: 'legend', text: 'Datasheet = read from the vendor\'s own document. Derived = computed from other figures (how is shown). Reported = from a third-party source. Conflicting claims found elsewhere are listed, never used.' }),
    el('div', { class: 'table-wrap' }, figuresTable(g.specs || {})),
  ];
  if (g.mig_profile) out.push(el('h3', { text: 'MIG profile' }), profileFacts(g.mig_profile));
  if (g.mig) out.push(...migTable(g));
  out.push(sourcesList(g.specs || {}));
  return out;
}

function how(f) {
  if (f.derived) return el('span', { class: 'tag derived' }, el('span', { class: 'tag-name', text: 'derived' }), el('span', { text: `: ${f.derivation}` }));
  return el('span', { class: f.verified ? 'tag datasheet' : 'tag reported', text: f.verified ? 'datasheet' : 'reported' });
}

function figuresTable(specs) {
  return labelCells(el('table', { class: 'data figures' },
    el('caption', { text: 'Every figure with its meaning, source and date' }),
    el('thead', {}, el('tr', {}, ['Figure', 'Value', 'What it means', 'Source', 'Checked', 'How', 'Conflicting claims'].map((h) => el('th', { scope: 'col', text: h })))),
    el('tbody', {}, Object.entries(specs).map(([key, f]) => el('tr', { 'data-key': key },
      el('th', { scope: 'row', text: label(key) }),
      el('td', { class: 'num value', text: f.unit === 'year' ? String(f.value) : `${fmt(f.value)}${f.unit ? ` ${f.unit}` : ''}` }),
      el('td', { class: 'explain', text: f.explain || '' }),
      el('td', {}, f.source && safeUrl(f.source.url) ? el('a', { href: safeUrl(f.source.url), rel: 'noopener noreferrer', target: '_blank', text: f.source.title || f.source.id }) : (f.source && f.source.id) || ''),
      el('td', { text: f.checked || '' }),
      el('td', {}, how(f)),
      el('td', { class: 'conflicts' }, (f.conflicts || []).length === 0 ? el('span', { class: 'muted', text: 'none' })
        : el('ul', {}, f.conflicts.map((c) => el('li', {},
          el('strong', { text: `${c.value}` }), ' in ',
          c.source && safeUrl(c.source.url) ? el('a', { href: safeUrl(c.source.url), rel: 'noopener noreferrer', target: '_blank', text: c.source.title || c.source.id }) : (c.source && c.source.id) || '?',
          c.note ? ` (${c.note})` : '')))))))));
}

function profileFacts(p) {
  const keys = [['profile_id', 'Profile id'], ['memory_slices', 'Memory slices'], ['compute_slices', 'Compute slices'], ['memory_mib', 'Memory (MiB)'],
    ['sm_count', 'SMs'], ['copy_engines', 'Copy engines'], ['decoders', 'Decoders'], ['jpeg', 'JPEG'], ['ofa', 'OFA'], ['max_count', 'At most per GPU'],
    ['kubernetes_resource', 'Kubernetes resource']];
  return el('dl', { class: 'facts' }, keys.filter(([k]) => p[k] !== undefined).map(([k, n]) => [el('dt', { text: n }), el('dd', { text: fmt(p[k]) })]),
    el('dt', { text: 'Start slots' }), el('dd', { text: (p.placements || []).map((x) => x.start).join(', ') }),
    p.source ? [el('dt', { text: 'Source' }), el('dd', {}, safeUrl(p.source.url) ? el('a', { href: safeUrl(p.source.url), rel: 'noopener noreferrer', target: '_blank', text: p.source.title || p.source.id }) : p.source.id)] : null,
    p.note ? [el('dt', { text: 'Note' }), el('dd', { text: p.note })] : null);
}

function migTable(g) {
  const m = g.mig;
  return [
    el('h3', { text: 'MIG profiles' }),
    el('p', {}, `Up to ${m.max_instances} instances on ${m.memory_slices} memory slices and ${m.compute_slices} compute slices; driver ${m.min_driver} or later.`,
      m.source && safeUrl(m.source.url) ? [' Source: ', el('a', { href: safeUrl(m.source.url), rel: 'noopener noreferrer', target: '_blank', text: m.source.title || m.source.id }), '.'] : ''),
    el('div', { class: 'table-wrap' }, labelCells(el('table', { class: 'data mig-profiles' },
      el('caption', { text: `MIG profiles of ${g.name}` }),
      el('thead', {}, el('tr', {}, ['Profile', 'Memory (MiB)', 'Memory slices', 'Compute slices', 'SMs', 'At most', 'Start slots'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, m.profiles.map((p) => el('tr', {},
        el('th', { scope: 'row' }, el('a', { href: `#/gpu/${g.id}/${p.name}`, text: p.name })),
        el('td', { class: 'num', text: fmt(p.memory_mib) }), el('td', { class: 'num', text: fmt(p.memory_slices) }),
        el('td', { class: 'num', text: fmt(p.compute_slices) }), el('td', { class: 'num', text: fmt(p.sm_count) }),
        el('td', { class: 'num', text: fmt(p.max_count) }), el('td', { text: (p.placements || []).map((x) => x.start).join(', ') })))))))];
}

function sourcesList(specs) {
  const seen = new Map();
  for (const f of Object.values(specs)) {
    if (f.source && f.source.id) seen.set(f.source.id, f.source);
    for (const c of f.conflicts || []) if (c.source && c.source.id) seen.set(c.source.id, c.source);
  }
  return el('section', { class: 'sources', 'aria-label': 'Sources' },
    el('h3', { text: 'Sources' }),
    el('ul', {}, [...seen.values()].map((s) => el('li', {},
      el('code', { text: s.id }), ' ',
      safeUrl(s.url) ? el('a', { href: safeUrl(s.url), rel: 'noopener noreferrer', target: '_blank', text: s.title || s.url }) : s.title || '',
      s.revision ? ` (revision ${s.revision})` : '', s.kind ? el('span', { class: 'muted', text: ` · ${s.kind}` }) : null))));
}
