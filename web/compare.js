// Compare: GPUs and MIG slices side by side, with bar charts drawn here (SVG, patterns and labels).
import { add, api, barChart, clear, el, errorBox, fmt, fmtFigure, gpuList, gpuPicker, isUnavailable, label, labelCells, liveStatus, unavailable, unitOf } from './ui.js';

let picker, results, status;
let lastKey = '';

export async function init(panel, r) {
  const gpus = await gpuList();
  status = liveStatus();
  results = el('div', { class: 'compare-results' });
  const initial = gpusFromRoute(r);
  picker = gpuPicker({ id: 'cmp-gpu', labelText: 'GPUs to compare', gpus, selected: initial.length ? initial : ['a100-80gb-sxm4', 'h100-80gb-sxm5'].filter((g) => gpus.some((x) => x.id === g)), onchange: run });
  add(panel, 
    el('h2', { text: 'Compare GPUs and MIG slices' }),
    el('p', { class: 'lead', text: 'The first is the baseline: the table gives every other one\'s difference in percent. Per dollar uses the cheapest listed offer (see Plan).' }),
    picker.node, status, results);
  await run(picker.get());
}

function gpusFromRoute(r) {
  const g = r.params && r.params.get('gpu');
  return g ? g.split(',').filter(Boolean) : [];
}

export async function route(panel, r) {
  const g = gpusFromRoute(r);
  if (g.length && g.join(',') !== picker.get().join(',')) {
    picker.set(g);
    await run(g);
  }
}

async function run(ids) {
  // Keep the address shareable, but only while Compare is the page shown: a comparison that finishes
  // loading after the reader moved on must not pull the address (and the next hashchange) back here.
  if (location.hash.startsWith('#/compare')) {
    history.replaceState(null, '', `#/compare?gpu=${ids.map(encodeURIComponent).join(',')}`);
  }
  if (ids.length === 0) {
    clear(results, el('p', { text: 'Add a GPU or MIG slice (a100-40gb-sxm4/3g.20gb) to compare.' }));
    return;
  }
  const key = ids.join(',');
  lastKey = key;
  status.textContent = 'Comparing…';
  // `spot: false` asks the library for value metrics: the cheapest on-demand offer of each target and
  // the figures per dollar-hour. A build whose compare has no offers answers without them.
  let r = await api('/compare', { gpu: ids, spot: false });
  if (!r.ok && r.status === 400 && r.error && r.error.field === 'spot') r = await api('/compare', { gpu: ids });
  if (key !== lastKey) return;
  if (isUnavailable(r)) { clear(results, unavailable('Compare', r.error)); status.textContent = ''; return; }
  if (!r.ok) { clear(results, errorBox(r.error)); status.textContent = 'The comparison failed.'; return; }
  status.textContent = `Compared ${r.data.targets.length}.`;
  clear(results, ...render(r.data));
}

const THROUGHPUT = ['fp64_tflops', 'fp32_tflops', 'tf32_tensor_tflops', 'bf16_tensor_tflops', 'fp16_tensor_tflops', 'fp8_tensor_tflops', 'int8_tensor_tops', 'int4_tensor_tops'];

function render(d) {
  const t = d.targets;
  const names = t.map((x) => x.id);
  const spec = (k) => t.map((x) => (typeof x.specs[k] === 'number' ? x.specs[k] : null));
  const derived = (k) => t.map((x) => (x.derived && typeof x.derived[k] === 'number' ? x.derived[k] : null));
  const value = (k) => t.map((x) => (x.value && typeof x.value[k] === 'number' ? x.value[k] : null));
  const present = (vals) => vals.some((v) => v !== null);
  const metrics = (keys, get) => keys.map((k) => ({ name: label(k), unit: unitOf(k), values: get(k) })).filter((m) => present(m.values));
  const out = [];
  const charts = [
    ['Throughput per precision (dense)', metrics(THROUGHPUT, spec)],
    ['Memory and bandwidth', metrics(['memory_gb', 'memory_bandwidth_gbps'], spec)],
    ['Per watt', metrics(Object.keys(t[0].derived || {}).filter((k) => k.endsWith('_per_w')), derived)],
    ['Per dollar', metrics(['bf16_tflops_per_dollar_hour', 'memory_gb_per_dollar_hour', 'units_per_dollar'], value),
      t.some((x) => x.value && x.value.offer) ? el('p', { class: 'muted', text: `Prices: ${(d.value_basis && d.value_basis.prices) || 'cheapest offer'}: ${t.filter((x) => x.value && x.value.offer).map((x) => `${x.id} $${fmt(x.value.price_per_gpu_hour)} (${x.value.offer}, ${x.value.captured_at})`).join('; ')}.` }) : null],
  ];
  out.push(el('div', { class: 'legend-row', 'aria-hidden': 'true' }, names.map((n, i) => el('span', { class: 'legend-item' },
    el('span', { class: `swatch series-${i % 8}` }), n))));
  for (const [title, m, note] of charts) {
    if (m.length === 0) {
      if (title === 'Per dollar') out.push(el('h3', { text: title }), el('p', { class: 'muted', text: 'No prices for these targets: per-dollar figures come from offers (see Plan).' }));
      continue;
    }
    out.push(el('figure', { class: 'chart-box' }, el('figcaption', { text: title }), barChart(title, m, names), note || null));
  }
  out.push(el('h3', { text: 'Side by side' }));
  const rows = [...d.keys.map((k) => ({ k, kind: 'spec' })),
    ...[...new Set(t.flatMap((x) => Object.keys(x.derived || {})))].map((k) => ({ k, kind: 'derived' })),
    ...[...new Set(t.flatMap((x) => Object.keys(x.value || {})))].map((k) => ({ k, kind: 'value' }))];
  out.push(el('div', { class: 'table-wrap' }, labelCells(el('table', { class: 'data compare-table' },
    el('caption', { text: `Figures side by side; percentages are against ${d.baseline}` }),
    el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'Figure' }), t.map((x, i) => el('th', { scope: 'col' },
      el('a', { href: `#/gpu/${x.id}`, text: x.name }), i === 0 ? el('span', { class: 'muted', text: ' (baseline)' }) : null)))),
    el('tbody', {}, rows.map(({ k, kind }) => el('tr', {},
      el('th', { scope: 'row', text: `${label(k)}${unitOf(k) ? ` (${unitOf(k)})` : ''}${kind === 'spec' ? '' : ` · ${kind === 'value' ? 'per dollar' : kind}`}` }),
      t.map((x, i) => {
        const v = kind === 'spec' ? x.specs[k] : ((kind === 'value' ? x.value : x.derived) || {})[k];
        const diffKey = kind === 'spec' ? k : `${kind}.${k}`;
        const diff = i > 0 && x.diff_percent_vs_first ? x.diff_percent_vs_first[diffKey] : undefined;
        return el('td', { class: typeof v === 'number' ? 'num' : '' }, v === undefined || v === null ? el('span', { class: 'muted', text: 'not listed' }) : fmtFigure(k, v),
          typeof diff === 'number' ? el('span', { class: 'diff', text: ` (${diff > 0 ? '+' : ''}${fmt(diff, 3)}%)` }) : null);
      }))))))));
  return out;
}
