// Fit and speed: a zoo model or an uploaded config.json; task, formats, batch and context; a stacked
// memory bar per target with its capacity line, the verdict, the largest batch and context, and the
// speed when this build has `perf`. Recomputes (debounced) as the inputs change.
import { add, api, bytes, clear, commands, debounce, declaredDefault, el, errorBox, fmt, gpuList, gpuPicker, isUnavailable, chartWidth, labelCells, NARROW_CHART_PX, textWidth,
  liveStatus, chartPatterns, readFile, seconds, svg, taskInfo, unavailable, vocabulary, words } from './ui.js';

const COMPONENTS = [
  ['weights_bytes', 'Weights'], ['kv_cache_bytes', 'KV cache'], ['activations_bytes', 'Activations'],
  ['gradients_bytes', 'Gradients'], ['optimizer_bytes', 'Optimizer state'], ['adapter_bytes', 'Adapters'],
  ['runtime_overhead_bytes', 'Runtime overhead'],
];
const SPEED = [
  ['ttft_seconds', 'Time to first token', seconds], ['tpot_seconds', 'Per output token', seconds],
  ['decode_tokens_per_second', 'Decode tokens/s (one sequence)', fmt], ['tokens_per_second', 'Tokens/s', fmt],
  ['step_seconds', 'Step time', seconds], ['samples_per_second', 'Samples/s', fmt], ['mfu', 'MFU', (v) => `${fmt(v * 100, 3)}%`],
  ['bound', 'Bound by', String],
];
let form, results, status, picker, vocab, uploaded = null, controller = null, haveFit = true, havePerf = false;

export async function init(panel, r) {
  const have = await commands();
  haveFit = have.includes('fit');
  havePerf = have.includes('perf');
  add(panel, el('h2', { text: 'Will it fit, and how fast?' }));
  if (!haveFit) {
    add(panel, unavailable('Fit (the memory model, POST /api/v1/fit)'));
    return;
  }
  const models = await api('/models');
  vocab = await vocabulary();
  const defaultTask = declaredDefault(vocab, 'task');
  const start = taskInfo(vocab, defaultTask);
  const options = (list, selected) => list.map((t) => el('option', { value: t, text: t, selected: t === selected }));
  const gpus = await gpuList();
  status = liveStatus();
  results = el('div', { class: 'fit-results' });
  const modelSelect = el('select', { id: 'fit-model', name: 'model' },
    (models.ok ? models.data.models : []).map((m) => el('option', { value: m.id, text: m.id, selected: m.id === 'llama-2-7b' })));
  const file = el('input', { type: 'file', id: 'fit-config', accept: '.json,application/json' });
  file.addEventListener('change', async () => {
    const f = file.files[0];
    if (!f) { uploaded = null; recompute(); return; }
    try {
      uploaded = { name: f.name, config: JSON.parse(await readFile(f)) };
      status.textContent = `Using ${f.name}.`;
    } catch (e) {
      uploaded = null;
      clear(results, errorBox({ message: `${f.name} is not valid JSON: ${e.message}`, field: 'config.json' }));
      return;
    }
    recompute();
  });
  const num = (id, name, value, min, extra = {}) => el('input', { type: 'number', id, name, value, min, step: 1, inputmode: 'numeric', ...extra });
  const fmtInput = (id, name, value, list) => el('input', { id, name, value: value || '', list, autocomplete: 'off' });
  const initialGpu = r.params && r.params.get('gpu');
  picker = gpuPicker({ id: 'fit-gpu', labelText: 'Targets', gpus, selected: initialGpu ? initialGpu.split(',') : ['a100-40gb-sxm4', 'a100-80gb-sxm4', 'h100-80gb-sxm5', 'l4'].filter((g) => gpus.some((x) => x.id === g)), onchange: () => recompute() });
  form = el('form', { class: 'workload', 'aria-label': 'Workload', onsubmit: (e) => { e.preventDefault(); recompute.now(); } },
    el('datalist', { id: 'fit-formats' }, words(vocab, 'weights').map((f) => el('option', { value: f }))),
    el('datalist', { id: 'fit-kv-formats' }, words(vocab, 'kv_cache').map((f) => el('option', { value: f }))),
    el('fieldset', {}, el('legend', { text: 'Model' }),
      el('label', { for: 'fit-model', text: 'Zoo model ' }), modelSelect,
      el('span', { class: 'or', text: ' or ' }),
      el('label', { for: 'fit-config', text: 'your config.json ' }), file,
      el('button', { type: 'button', text: 'Clear file', onclick: () => { file.value = ''; uploaded = null; recompute(); } })),
    el('fieldset', {}, el('legend', { text: 'Workload' }),
      el('label', {}, 'Task ', el('select', { id: 'fit-task', name: 'task' }, options(words(vocab, 'task'), defaultTask))),
      el('label', {}, 'Weights ', fmtInput('fit-weights', 'weights', start.weights, 'fit-formats')),
      el('label', {}, 'KV cache ', fmtInput('fit-kv', 'kv_cache', start.kv_cache, 'fit-kv-formats')),
      el('label', {}, 'Batch ', num('fit-batch', 'batch', 1, 1)),
      el('label', {}, 'Context (tokens) ', num('fit-context', 'context', 4096, 1, { step: 256 })),
      el('label', {}, 'Engine ', el('select', { id: 'fit-engine', name: 'engine' },
        options(words(vocab, 'engine'), declaredDefault(vocab, 'engine')))),
      el('label', {}, 'Tensor parallel ', num('fit-tp', 'tp', 1, 1)),
      el('p', { class: 'hint', text: 'To split one model over the GPUs of a target (h100-80gb-sxm5x8), set tensor parallel to the count; a larger count adds replicas.' })),
    havePerf ? el('fieldset', {}, el('legend', { text: 'Speed' }),
      el('label', {}, 'Input tokens ', num('fit-in', 'input_tokens', 1024, 1)),
      el('label', {}, 'Output tokens ', num('fit-out', 'output_tokens', 256, 1))) : null,
    el('fieldset', {}, el('legend', { text: 'Targets' }), picker.node,
      el('p', { class: 'hint', text: 'A count multiplies a target: h100-80gb-sxm5x8. MIG slices: a100-40gb-sxm4/3g.20gb.' })),
    el('button', { type: 'submit', text: 'Compute now' }));
  // Each task has the library's default weights (QLoRA: a quantized base, bitsandbytes NF4 with double
  // quantization): while the field holds the previous task's default, a new task brings its own.
  let lastTask = defaultTask;
  form.querySelector('#fit-task').addEventListener('change', (e) => {
    const w = form.querySelector('#fit-weights');
    const before = taskInfo(vocab, lastTask).weights;
    const after = taskInfo(vocab, e.target.value).weights;
    if (after && (w.value.trim() === '' || w.value.trim().toLowerCase() === before)) w.value = after;
    lastTask = e.target.value;
  });
  form.addEventListener('input', () => recompute());
  form.addEventListener('change', (e) => { if (e.target !== file) recompute(); });
  add(panel, el('p', { class: 'lead', text: 'Memory is counted line by line (weights, KV cache, activations, training state, runtime). The bar shows the total against what the device really offers.' }),
    form, havePerf ? null : el('p', { class: 'notice', role: 'note', text: 'Speed (perf) is not available in this build; memory only.' }), status, results);
  recompute.now();
}

function request() {
  const v = (id) => form.querySelector(`#${id}`);
  const req = {
    model: uploaded ? uploaded.name.replace(/\.json$/i, '') : v('fit-model').value,
    config: uploaded ? uploaded.config : undefined,
    task: v('fit-task').value,
    weights: v('fit-weights').value.trim() || undefined,
    kv_cache: v('fit-kv').value.trim() || undefined,
    batch: Number(v('fit-batch').value) || 1,
    context: Number(v('fit-context').value) || 1,
    engine: v('fit-engine').value,
    tp: Number(v('fit-tp').value) || 1,
  };
  const g = picker.get();
  if (g.length) req.gpu = g;
  if (taskInfo(vocab, req.task).training) delete req.kv_cache;
  for (const k of Object.keys(req)) if (req[k] === undefined) delete req[k];
  return req;
}

const recompute = Object.assign(debounce(() => run(), 300), { now: () => run() });

async function run() {
  if (controller) controller.abort();
  controller = new AbortController();
  const signal = controller.signal;
  const req = request();
  status.textContent = 'Computing…';
  results.setAttribute('aria-busy', 'true');
  const v = (id) => form.querySelector(`#${id}`);
  const perfReq = havePerf ? { ...req, input_tokens: Number(v('fit-in').value) || 1, output_tokens: Number(v('fit-out').value) || 1 } : null;
  const [fit, perf] = await Promise.all([api('/fit', req, { signal }), perfReq ? api('/perf', perfReq, { signal }) : null]);
  if (signal.aborted) return;
  results.removeAttribute('aria-busy');
  if (isUnavailable(fit)) { clear(results, unavailable('Fit', fit.error)); status.textContent = ''; return; }
  if (!fit.ok) { clear(results, errorBox(fit.error)); status.textContent = 'Not computed: see the error.'; return; }
  const targets = fit.data.targets || [];
  const refused = targets.filter((t) => t.refusal).length;
  status.textContent = `${targets.filter((t) => t.fits).length} of ${targets.length} targets fit${refused ? `; ${refused} cannot run the configuration` : ''}.`;
  clear(results, rentThis(req), ...render(fit.data, perf && perf.ok ? perf.data : null, perf && !perf.ok && !isUnavailable(perf) ? perf.error : null));
}

// "Rent this": the Rent tab with this model and weights filled in (inference: an uploaded config has
// no zoo id to carry, and training is not rented by rate).
function rentThis(req) {
  if (uploaded || taskInfo(vocab, req.task).training) return null;
  const q = new URLSearchParams({ model: req.model });
  if (req.weights) q.set('weights', req.weights);
  return el('p', { class: 'rent-this' }, el('a', { href: `#/rent?${q}`, class: 'button', id: 'fit-rent-this', text: 'Rent this: live offers where it fits' }));
}

function render(d, perf, perfError) {
  const out = [];
  const m = d.model || {};
  out.push(el('p', { class: 'model-line' }, el('strong', { text: m.id || 'model' }),
    m.parameters ? ` · ${fmt(m.parameters / 1e9, 4)} B parameters` : '',
    m.active_parameters && m.active_parameters !== m.parameters ? ` (${fmt(m.active_parameters / 1e9, 4)} B active)` : ''));
  const explain = {};
  for (const e of Array.isArray(d.explain) ? d.explain : []) explain[e.key] = e.explain;
  if (d.memory) {
    out.push(el('div', { class: 'table-wrap' }, el('table', { class: 'data breakdown' },
      el('caption', { text: 'Memory per device' }),
      el('tbody', {}, COMPONENTS.filter(([k]) => typeof d.memory[k] === 'number' && d.memory[k] > 0).map(([k, name], i) => el('tr', {},
        el('th', { scope: 'row' }, el('span', { class: `swatch comp-${i}`, 'aria-hidden': 'true' }), name),
        el('td', { class: 'num', text: bytes(d.memory[k]) }),
        el('td', { class: 'explain', text: explain[k] || '' }))),
      el('tr', { class: 'total' }, el('th', { scope: 'row', text: 'Total' }), el('td', { class: 'num', text: bytes(d.memory.total_bytes) }), el('td', { class: 'explain', text: explain.total_bytes || '' }))))));
  }
  const targets = d.targets || [];
  if (targets.length) out.push(el('h3', { text: 'Per target' }), memoryChart(d, targets));
  const perfBy = new Map(((perf && perf.targets) || []).map((p) => [`${p.target}x${p.count || 1}`, p]));
  // The speed columns this task has (perf gives the fields that apply: latency for inference, step
  // time and MFU for training).
  const speedCols = SPEED.filter(([k]) => ((perf && perf.targets) || []).some((p) => p[k] !== undefined && p[k] !== null));
  out.push(el('div', { class: 'table-wrap' }, labelCells(el('table', { class: 'data verdicts' },
    el('caption', { text: 'Verdict per target' }),
    el('thead', {}, el('tr', {}, ['Target', 'Verdict', 'Needs', 'Capacity', 'Headroom', 'Largest batch', 'Largest context',
      ...speedCols.map(([, h]) => h)].map((h) => el('th', { scope: 'col', text: h })))),
    el('tbody', {}, targets.map((t) => {
      const p = perfBy.get(`${t.target}x${t.count || 1}`);
      return el('tr', { class: t.fits ? 'fits' : 'nofit', 'data-target': t.target },
        el('th', { scope: 'row' }, el('a', { href: `#/gpu/${t.target}`, text: t.target }), (t.count || 1) > 1 ? ` × ${t.count}` : ''),
        // A refused target (no engine runs it there) shows the reason instead of a verdict on memory.
        el('td', { class: 'verdict' }, el('span', { class: t.fits ? 'ok' : 'bad', text: t.fits ? '✓ fits' : t.refusal ? '✗ cannot run' : '✗ does not fit' }),
          t.refusal && t.reason ? el('span', { class: 'reason', 'data-refusal': t.refusal, text: ` ${t.reason}` }) : ''),
        el('td', { class: 'num', text: bytes(t.total_bytes) }),
        el('td', { class: 'num', text: bytes(t.capacity_bytes) }),
        el('td', { class: 'num', text: bytes(t.headroom_bytes) }),
        el('td', { class: 'num', text: t.refusal ? '–' : fmt(t.max_batch) }),
        el('td', { class: 'num', text: t.refusal ? '–' : fmt(t.max_context) }),
        // No speed where it does not run: perf gives null and its reason (shown on hover).
        speedCols.map(([k, , f]) => el('td', { class: k === 'bound' ? '' : 'num', ...(p && p.reason ? { title: p.reason } : {}), text: p && p[k] !== undefined && p[k] !== null ? f(p[k]) : '–' })));
    }))))));
  if (perfError) out.push(errorBox({ ...perfError, message: `Speed: ${perfError.message}` }));
  return out;
}

// One stacked bar per target (same workload, so the same stack unless a target splits it) and a
// vertical line at the target's capacity. Patterns and a legend tell the parts apart without colour.
// Wide: each target's label left of its bar, its verdict right of it. Narrow (a phone, chartWidth under
// NARROW_CHART_PX): label and verdict on a line above the bar, which takes the whole width.
const LABEL_PAD = 16, BARS_UNITS = 520, LEGEND_SWATCH = 18, LEGEND_GAP = 14;
const MIN_WIDE_SCALE = 0.75;  // 9 px of a 12 px label: the smallest the wide layout may be scaled to
const targetLabel = (t) => `${t.target}${(t.count || 1) > 1 ? ` ×${t.count}` : ''}`;
const verdictText = (t) => `${t.fits ? '✓' : t.refusal ? '✗ cannot run:' : '✗'} ${bytes(t.total_bytes)} of ${bytes(t.capacity_bytes)}`;
function memoryChart(d, targets) {
  const room = chartWidth(2000);
  const labelW = Math.ceil(Math.max(...targets.map((t) => textWidth(targetLabel(t))))) + LABEL_PAD;
  const valueW = Math.ceil(Math.max(...targets.map((t) => textWidth(verdictText(t))))) + 20;
  // Wide when the labels' column, the bars and the verdicts side by side are drawn at no less than
  // MIN_WIDE_SCALE (12 px labels at 9 px or more), else narrow.
  const wideLeft = Math.max(150, labelW), wideRight = Math.max(230, valueW);
  const narrow = room < (wideLeft + BARS_UNITS + wideRight) * MIN_WIDE_SCALE || room < NARROW_CHART_PX;
  const left = narrow ? 0 : wideLeft;
  const right = narrow ? 0 : wideRight;
  const width = narrow ? room : left + BARS_UNITS + right;
  const barH = 22, gap = 12, lineH = 16;  // bar, space between rows, a text line (12 px labels)
  const stackOf = (t) => t.memory || d.memory || {};
  const max = Math.max(...targets.map((t) => Math.max(t.capacity_bytes || 0, t.total_bytes || stackOf(t).total_bytes || 0)), 1) * 1.05;
  const scale = (v) => ((width - left - right) * v) / max;
  const body = [];
  const pat = chartPatterns();
  const used = COMPONENTS.filter(([k]) => targets.some((t) => (stackOf(t)[k] || 0) > 0));
  // The legend flows into as many rows as the width needs.
  let lx = 0, ly = 0;
  for (const [i, [, name]] of used.entries()) {
    const w = LEGEND_SWATCH + textWidth(name) + LEGEND_GAP;
    if (lx > 0 && lx + w > width) { lx = 0; ly += 18; }
    body.push(svg('rect', { x: lx, y: ly, width: 14, height: 12, fill: pat.fill(i), class: `comp comp-${i}` }),
      svg('text', { x: lx + LEGEND_SWATCH, y: ly + 11, class: 'chart-label', text: name }));
    lx += w;
  }
  let y = ly + 30;
  for (const t of targets) {
    if (narrow) {
      // The verdict right-aligned on the label's line when both fit, else on a line of its own.
      body.push(svg('text', { x: 0, y: y + 12, class: 'chart-label', text: targetLabel(t) }));
      if (textWidth(targetLabel(t)) + textWidth(verdictText(t)) + 12 > width) y += lineH;
      body.push(svg('text', { x: width, y: y + 12, 'text-anchor': 'end', class: 'chart-value', text: verdictText(t) }));
      y += lineH;
    } else {
      body.push(svg('text', { x: left - 8, y: y + barH - 6, 'text-anchor': 'end', class: 'chart-label', text: targetLabel(t) }));
    }
    let x = left;
    used.forEach(([k, name], i) => {
      const v = stackOf(t)[k] || 0;
      if (v <= 0) return;
      const w = scale(v);
      body.push(svg('rect', { x, y, width: Math.max(w, 0.5), height: barH, fill: pat.fill(i), class: `comp comp-${i}` },
        svg('title', { text: `${name}: ${bytes(v)}` })));
      x += w;
    });
    if (t.capacity_bytes) {
      const cx = left + scale(t.capacity_bytes);
      body.push(svg('line', { x1: cx, x2: cx, y1: y - 4, y2: y + barH + 4, class: 'capacity' }, svg('title', { text: `capacity ${bytes(t.capacity_bytes)}` })));
    }
    if (!narrow) body.push(svg('text', { x: width - right + 10, y: y + barH - 6, class: 'chart-value', text: verdictText(t) }));
    y += barH + gap;
  }
  const h = y + 10;
  return el('figure', { class: 'chart-box' }, el('figcaption', { text: 'Memory needed per target; the thick vertical line is the capacity' }),
    svg('svg', { viewBox: `0 0 ${width} ${h}`, class: 'chart memory-chart', role: 'img', 'aria-label': targets.map((t) => `${t.target}: ${t.fits ? 'fits' : t.refusal ? 'cannot run' : 'does not fit'}, needs ${bytes(t.total_bytes)} of ${bytes(t.capacity_bytes)}`).join('; ') },
      pat.defs, ...body));
}
