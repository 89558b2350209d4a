// Plan: where to rent it. Offers (the shipped snapshot or an uploaded file), the recommended plan
// with its reasons, every plan considered, and a chart of cost against time.
import { add, api, barChart, chartWidth, clear, commands, declaredDefault, el, errorBox, fmt, gpuList, isUnavailable, labelCells, liveStatus, NARROW_CHART_PX, textWidth, readFile, seconds, sortableTable, svg, taskInfo, unavailable, vocabulary, words } from './ui.js';

let form, out, status, vocab, offersText = null, offersName = '';

export async function init(panel) {
  const have = await commands();
  // The plan form first (what a renter came for), the offers it plans over after it.
  add(panel, el('h2', { text: 'Where to rent it' }), el('h3', { text: 'Plan' }));
  const offersBox = offersSection(have.includes('offers.list'));
  if (!have.includes('plan')) {
    add(panel, unavailable('Plan (POST /api/v1/plan)'), offersBox);
    return;
  }
  const models = await api('/models');
  vocab = await vocabulary();
  status = liveStatus();
  status.id = 'plan-status';
  out = el('div', { class: 'plan-results' });
  const num = (id, name, value, extra = {}) => el('input', { type: 'number', id, name, value, min: 0, step: 'any', ...extra });
  const offers = el('input', { type: 'file', id: 'plan-offers', accept: '.csv,.json,.yaml,.yml' });
  offers.addEventListener('change', async () => {
    const f = offers.files[0];
    offersText = f ? await readFile(f) : null;
    offersName = f ? f.name : '';
    status.textContent = f ? `Using offers from ${f.name}.` : 'Using the shipped offers.';
  });
  // Serving, or one of the library's training tasks (full training, LoRA, QLoRA: GET /vocabulary's tasks).
  const trainings = (vocab.tasks || []).filter((t) => t.training);
  const goal = el('select', { id: 'plan-goal', name: 'goal' }, el('option', { value: 'serve', text: 'serve requests' }),
    trainings.map((t) => el('option', { value: t.name, text: t.adapter ? `fine-tune (${t.name}${t.weights ? `, ${t.weights} base` : ''})` : `train (${t.name}: every weight)` })));
  const engine = el('select', { id: 'plan-engine', name: 'engine' }, words(vocab, 'engine').map((e) => el('option', { value: e, text: e === declaredDefault(vocab, 'engine') ? `${e} (default)` : e, selected: e === declaredDefault(vocab, 'engine') })));
  const serve = el('fieldset', { class: 'goal-serve' }, el('legend', { text: 'Serving goal' }),
    el('label', {}, 'Requests/s ', num('plan-rate', 'rate', 5)),
    el('label', {}, 'Input tokens ', num('plan-in', 'input_tokens', 1024)),
    el('label', {}, 'Output tokens ', num('plan-out', 'output_tokens', 256)),
    el('label', {}, 'First-token target (s) ', num('plan-ttft', 'ttft_slo', '')),
    el('label', {}, 'Per-token target (s) ', num('plan-tpot', 'tpot_slo', '')));
  const train = el('fieldset', { class: 'goal-train', hidden: true }, el('legend', { text: 'Training goal' }),
    el('label', {}, 'Tokens to train on ', num('plan-train', 'train_tokens', 1e9)),
    el('label', {}, 'Deadline ', el('input', { id: 'plan-deadline', name: 'deadline', placeholder: 'e.g. 24h' })),
    el('label', {}, 'Budget ', num('plan-budget', 'budget', '')));
  // A task brings its default weights (QLoRA: a quantized base) while the field holds the last one's.
  let lastTask = declaredDefault(vocab, 'task');
  goal.addEventListener('change', () => {
    serve.hidden = goal.value !== 'serve'; train.hidden = goal.value === 'serve';
    const task = goal.value === 'serve' ? declaredDefault(vocab, 'task') : goal.value;
    const w = form.querySelector('#plan-weights');
    if (w.value.trim() === '' || w.value.trim() === (taskInfo(vocab, lastTask).weights || '')) w.value = taskInfo(vocab, task).weights || '';
    lastTask = task;
  });
  form = el('form', { class: 'workload', 'aria-label': 'Plan request', onsubmit: (e) => { e.preventDefault(); run(); } },
    el('fieldset', {}, el('legend', { text: 'Workload' }),
      el('label', {}, 'Model ', el('select', { id: 'plan-model', name: 'model' }, (models.ok ? models.data.models : []).map((m) => el('option', { value: m.id, text: m.id, selected: m.id === 'llama-2-7b' })))),
      el('label', {}, 'Weights ', el('input', { id: 'plan-weights', name: 'weights', value: taskInfo(vocab, declaredDefault(vocab, 'task')).weights || '' })),
      el('label', {}, 'Goal ', goal),
      el('label', {}, 'Engine ', engine, el('span', { class: 'hint-inline muted', text: ` (the CLI's default is ${declaredDefault(vocab, 'engine')} too)` }))),
    serve, train,
    el('fieldset', {}, el('legend', { text: 'Offers' }),
      el('label', { for: 'plan-offers', text: 'Offers file (default: the shipped snapshot) ' }), offers,
      el('label', {}, 'Objective ', el('select', { id: 'plan-objective', name: 'objective' },
        words(vocab, 'objective').map((o) => el('option', { value: o, text: `minimise ${o}`, selected: o === declaredDefault(vocab, 'objective') })))),
      el('label', { class: 'check' }, el('input', { type: 'checkbox', id: 'plan-spot', name: 'spot' }), ' Allow spot'),
      el('label', {}, 'Show ', num('plan-top', 'top', 10, { step: 1, min: 1 }), ' plans')),
    optionFields(),
    el('button', { type: 'submit', text: 'Plan' }));
  add(panel, el('p', { class: 'lead', text: 'For each offer gpuplan sizes the deployment (count, tensor and pipeline degree, replicas, batch), keeps what meets the goal and ranks by cost or time. Every rejected offer says why.' }), form, status, out, offersBox);
}

// The plan's other keys, generated from the options the server declares (GET /vocabulary: type, range,
// default, help): the ones a renter sets most in view, every other one under "More options". The keys
// the form above asks for, and those that are not form fields (objects, files), are left out.
const PLAN_FORM_KEYS = new Set(['model', 'config', 'weights', 'task', 'engine', 'rate', 'input_tokens', 'output_tokens', 'ttft_slo', 'tpot_slo',
  'train_tokens', 'deadline', 'budget', 'objective', 'spot', 'top', 'offers', 'market']);
const PLAN_SHOWN_KEYS = ['gpu', 'provider', 'region', 'context', 'max_age', 'max_gpus', 'max_instances'];
let optionInputs = [];
function optionFields() {
  const opts = (vocab.options || []).filter((o) => (o.commands || []).includes('plan') && !PLAN_FORM_KEYS.has(o.name) && !['object', 'files'].includes(o.type));
  const seen = new Set();
  optionInputs = [];
  const field = (o) => {
    if (seen.has(o.name)) return null;
    seen.add(o.name);
    const id = `plan-opt-${o.name}`;
    const values = o.values || (o.vocabulary ? words(vocab, o.vocabulary) : null);
    const dflt = o.default === null || o.default === undefined ? '' : Array.isArray(o.default) ? o.default.join(',') : String(o.default);
    let input;
    if (o.type === 'bool' || o.type === 'flag') {
      input = el('input', { type: 'checkbox', id, name: o.name, checked: o.default === true });
    } else if (o.type === 'enum' && values) {
      input = el('select', { id, name: o.name }, el('option', { value: '', text: dflt ? `default (${dflt})` : 'default' }), values.map((x) => el('option', { value: x, text: x })));
    } else if (o.type === 'int' || o.type === 'number') {
      const r = o.range || {};
      input = el('input', { type: 'number', id, name: o.name, placeholder: dflt, step: o.type === 'int' ? 1 : 'any',
        min: typeof r.min === 'number' ? r.min : undefined, max: typeof r.max === 'number' ? r.max : undefined });
    } else {
      input = el('input', { id, name: o.name, placeholder: dflt || (o.type === 'list' ? 'comma-separated' : ''), autocomplete: 'off' });
    }
    optionInputs.push({ o, input });
    const text = `${o.name.replace(/_/g, ' ')}${o.unit ? ` (${o.unit})` : ''} `;
    return el('label', { class: input.type === 'checkbox' ? 'check' : '', title: o.help || '', 'data-option': o.name },
      input.type === 'checkbox' ? [input, ` ${text}`] : [text, input]);
  };
  const byName = new Map(opts.map((o) => [o.name, o]));
  const shown = PLAN_SHOWN_KEYS.filter((k) => byName.has(k)).map((k) => field(byName.get(k)));
  const rest = opts.map(field).filter(Boolean);
  return [el('fieldset', { class: 'plan-options' }, el('legend', { text: 'GPUs, providers, regions, context, price age, size' }), shown,
    el('p', { class: 'hint', text: 'Empty fields take the library\'s defaults (shown greyed). Lists are comma-separated.' })),
  el('details', { class: 'plan-more' }, el('summary', { text: `More options (${rest.length}, as gpuplan plan --help lists them)` }),
    el('fieldset', { class: 'plan-options' }, el('legend', { text: 'Every other plan option' }), rest))];
}
// The generated fields' values, typed: what was set, nothing for an empty field (the default applies).
function optionValues() {
  const out = {};
  for (const { o, input } of optionInputs) {
    if (input.type === 'checkbox') { if (input.checked !== (o.default === true)) out[o.name] = input.checked; continue; }
    const v = input.value.trim();
    if (v === '') continue;
    if (o.type === 'int' || o.type === 'number') out[o.name] = Number(v);
    else if (o.type === 'list') out[o.name] = v.split(',').map((x) => x.trim()).filter(Boolean);
    else out[o.name] = v;
  }
  return out;
}

function request() {
  const v = (id) => form.querySelector(`#${id}`).value.trim();
  const n = (id) => (v(id) === '' ? undefined : Number(v(id)));
  const req = { model: v('plan-model'), weights: v('plan-weights') || undefined, objective: v('plan-objective'), top: n('plan-top') };
  if (form.querySelector('#plan-spot').checked) req.spot = true;
  req.engine = v('plan-engine') || undefined;
  Object.assign(req, optionValues());
  if (v('plan-goal') === 'serve') Object.assign(req, { rate: n('plan-rate'), input_tokens: n('plan-in'), output_tokens: n('plan-out'), ttft_slo: n('plan-ttft'), tpot_slo: n('plan-tpot') });
  else Object.assign(req, { task: v('plan-goal'), train_tokens: n('plan-train'), deadline: v('plan-deadline') || undefined, budget: n('plan-budget') });
  if (offersText !== null) req.offers = [{ name: offersName, text: offersText }];
  for (const k of Object.keys(req)) if (req[k] === undefined) delete req[k];
  return req;
}

async function run() {
  status.textContent = 'Planning…';
  const r = await api('/plan', request());
  if (isUnavailable(r)) { clear(out, unavailable('Plan', r.error)); status.textContent = ''; return; }
  if (!r.ok) { clear(out, errorBox(r.error)); status.textContent = 'No plan: see the error.'; return; }
  const plans = r.data.plans || [];
  const sent = request();
  status.textContent = `${plans.length} plans, planned with engine ${sent.engine || declaredDefault(vocab, 'engine')}${sent.task ? `, task ${sent.task}` : ''}.`;
  clear(out, rentThis(), ...render(r.data));
}

// "Rent this": the Rent tab with this serving workload filled in (live market offers only).
function rentThis() {
  if (form.querySelector('#plan-goal').value !== 'serve') return null;
  const req = request();
  const q = new URLSearchParams();
  for (const k of ['model', 'weights', 'rate', 'input_tokens', 'output_tokens', 'ttft_slo', 'tpot_slo']) if (req[k] !== undefined) q.set(k, String(req[k]));
  return el('p', { class: 'rent-this' }, el('a', { href: `#/rent?${q}`, class: 'button', id: 'plan-rent-this', text: 'Rent this: the live offers where it fits' }));
}

const money = (v) => (typeof v === 'number' ? `$${fmt(v, 4)}` : '–');

// A plan's start-up (issue #18): provisioning plus the weights' load, as the library reports them.
function startupText(p) {
  if (typeof p.startup_seconds !== 'number') return '–';
  const parts = [typeof p.provisioning_seconds === 'number' ? `provisioning ${seconds(p.provisioning_seconds)}` : null,
    typeof p.load_seconds === 'number' ? `weights load ${seconds(p.load_seconds)}` : null].filter(Boolean);
  return `${seconds(p.startup_seconds)}${parts.length ? ` (${parts.join(', ')})` : ''}`;
}
// Its billing: the step and the minimum billed, and for a job with an end the time each instance is billed
// (billed_seconds: start-up and run rounded up to the step, at least the minimum; a service has none).
function billingText(p) {
  if (!p.billing) return '–';
  const min = typeof p.min_billable_seconds === 'number' && p.min_billable_seconds > 0 ? `, minimum ${seconds(p.min_billable_seconds)}` : ', no minimum';
  const billed = p.billed_seconds > 0 ? `; billed ${seconds(p.billed_seconds)} per instance` : '';
  return `${p.billing}${min}${billed}`;
}
// The same in the plans table's short words: "start-up 7 min (300 s + 122 s load)", "billed per second, min 1 min".
function startupShort(p) {
  if (typeof p.startup_seconds !== 'number') return '';
  return `start-up ${seconds(p.startup_seconds)}${typeof p.load_seconds === 'number' && typeof p.provisioning_seconds === 'number' ? ` (${seconds(p.provisioning_seconds)} + ${seconds(p.load_seconds)} load)` : ''}`;
}
function billingShort(p) {
  if (!p.billing) return '';
  const min = p.min_billable_seconds > 0 ? `, min ${seconds(p.min_billable_seconds)}` : ', no min';
  return `billed ${p.billing.replace('-', ' ')}${min}${p.billed_seconds > 0 ? `; ${seconds(p.billed_seconds)} per instance` : ''}`;
}
// A proxy's mark (issue #18): a stand-in priced from another product, ranked after every real offer.
function proxyMark(p) {
  return p && p.proxy ? el('span', { class: 'proxy-badge', role: 'note', title: p.proxy_reason || '', text: ' proxy' }) : null;
}

function render(d) {
  const plans = d.plans || [];
  const best = d.best || plans.find((p) => p.meets_goal !== false);
  const res = [];
  // A total needs an end: a training job has one (seconds_total); a service runs until stopped, and the
  // library's cost_total for it is one hour's price, so serving plans show no Total column.
  const finite = plans.some((p) => p.seconds_total > 0);
  if (typeof d.configurations === 'number') {
    res.push(el('p', { class: 'muted', text: `${fmt(d.configurations)} configurations over ${fmt(d.offers_considered)} offers considered${d.now ? ` (prices as of their capture dates; today ${d.now})` : ''}.` }));
  }
  if (best) {
    res.push(el('section', { class: 'recommended', 'aria-label': 'Recommended plan' },
      el('h3', { text: 'Recommended' }),
      el('p', {}, el('strong', { text: `${best.provider || ''} ${best.offer || ''}`.trim() }), proxyMark(best), marketMarks(best), best.region ? ` in ${best.region}` : '', `: ${best.gpus || 1} × ${best.target}`,
        best.tp ? `, tensor parallel ${best.tp}` : '', best.pp > 1 ? `, pipeline ${best.pp}` : '', best.replicas ? `, ${best.replicas} replica(s)` : '', best.batch ? `, batch ${best.batch}` : ''),
      el('ul', {},
        el('li', { text: `Cost: ${money(best.cost_per_hour)} per hour${finite && typeof best.cost_total === 'number' ? `, ${money(best.cost_total)} in total` : ''}${typeof best.cost_per_million_tokens === 'number' ? `, ${money(best.cost_per_million_tokens)} per million tokens` : ''}` }),
        typeof best.seconds_total === 'number' && best.seconds_total > 0 ? el('li', { text: `Time: ${seconds(best.seconds_total)}` }) : null,
        best.ttft_seconds > 0 ? el('li', { text: `Latency: first token ${seconds(best.ttft_seconds)}, then ${seconds(best.tpot_seconds)} per token; ${fmt(best.tokens_per_second)} tokens/s` }) : null,
        best.capacity_requests_per_second > 0 ? el('li', { text: `Capacity: ${fmt(best.capacity_requests_per_second)} requests/s` }) : null,
        best.reason ? el('li', { text: `Why: ${best.reason}` }) : null,
        el('li', { class: 'plan-startup', text: `Start-up: ${startupText(best)}` }),
        el('li', { class: 'plan-billing', text: `Billing: ${billingText(best)}${best.billing_source ? ` (terms: ${best.billing_source})` : ''}` }),
        best.proxy ? el('li', { class: 'plan-proxy' }, 'Proxy: ', el('span', { text: `${best.proxy_reason || 'priced from another product'}; no real offer meets the goal` })) : null,
        best.price_warning ? el('li', {}, 'Price: ', priceWarning(best), ` (captured ${best.captured_at}; Max age drops such offers)`) : null)));
  } else {
    res.push(el('p', { class: 'notice', text: 'No offer meets the goal; the table says why for each.' }));
  }
  res.push(costTimeChart(plans));
  if (!finite) res.push(perTargetCharts(plans));
  if ((d.rejected || []).length) {
    res.push(el('details', { class: 'rejected' }, el('summary', { text: `${d.rejected.length} offers rejected, each with its reason` }),
      el('ul', {}, d.rejected.map((r) => el('li', {}, el('code', { text: r.offer }), r.target ? ` (${r.target})` : '', `: ${r.reason}`)))));
  }
  res.push(el('div', { class: 'table-wrap' }, labelCells(el('table', { class: 'data plans' },
    el('caption', { text: finite ? 'Plans considered' : 'Plans considered (no total: a service runs until stopped, so its cost is per hour and per million tokens)' }),
    el('thead', {}, el('tr', {}, ['Offer', 'Provider', 'Region', 'Target', 'GPUs', 'TP', 'PP', 'Replicas', 'Batch', 'Per hour', finite ? 'Total' : null, 'Per M tokens', 'Time, start-up, billing', 'Meets goal', 'Reason'].filter(Boolean).map((h) => el('th', { scope: 'col', text: h })))),
    el('tbody', {}, plans.map((p) => el('tr', {},
      el('th', { scope: 'row' }, p.offer || '', proxyMark(p), marketMarks(p), priceWarning(p)), el('td', { text: p.provider || '' }), el('td', { text: p.region || '' }), el('td', { text: p.target || '' }),
      ['gpus', 'tp', 'pp', 'replicas', 'batch'].map((k) => el('td', { class: 'num', text: fmt(p[k]) })),
      el('td', { class: 'num', text: money(p.cost_per_hour) }), finite ? el('td', { class: 'num', text: money(p.cost_total) }) : null, el('td', { class: 'num', text: money(p.cost_per_million_tokens) }),
      // The time, then the start-up and the billing under it, in short words (a column of their own widened
      // the table past 1400 px).
      el('td', { class: 'num time' }, p.seconds_total > 0 ? seconds(p.seconds_total) : typeof p.tpot_seconds === 'number' ? `${seconds(p.tpot_seconds)}/token` : '–',
        el('br'), el('span', { class: 'startup', text: startupShort(p) }), el('br'), el('span', { class: 'billing', text: billingShort(p) })),
      el('td', { text: p.meets_goal === false ? '✗ no' : '✓ yes' }), el('td', { text: p.reason || '' }))))))));
  return res;
}

// An old list price's warning (the server's price_warning: "list price from 2024-06, may be stale (...)"),
// shown beside the price it is about; nothing for a current price.
function priceWarning(o) {
  return o && o.price_warning ? el('span', { class: 'price-warning', role: 'note', text: ` ⚠ ${o.price_warning}` }) : null;
}

// A market offer's (or plan's) marks: "live" with the count free now, and "demo data" for the demo
// inventory's; nothing for a file's offer.
function marketMarks(o) {
  if (o.source !== 'market') return null;
  return el('span', { class: 'offer-live' }, ' ', el('span', { class: 'live-badge', text: 'live' }),
    ` ${fmt(o.available)} available`, o.demo ? el('span', { class: 'demo-badge', text: 'demo data' }) : null);
}

// The plans on the Pareto front of the chart's two axes (both smaller is better): those no other plan
// beats or equals on both with one strictly better. Among plans that meet the goal when any does.
export function paretoFront(pts) {
  const pool = pts.some((q) => q.p.meets_goal !== false) ? pts.filter((q) => q.p.meets_goal !== false) : pts;
  return pool.filter((q) => !pool.some((o) => o !== q && o.x <= q.x && o.y <= q.y && (o.x < q.x || o.y < q.y)));
}

// Cost (y) against time (x), one marker per plan; the Pareto front (computed here, over these axes)
// joined by a line, its points ringed and labelled. Markers differ by shape (met goal: filled circle;
// missed: hollow square), so the chart reads without colour. A label goes where it overlaps no other
// label, marker or the chart's edge (beside its point, or further out with a leader line); a front
// point with no such place keeps its tooltip only, and the caption says how many are labelled.
const PT_R = 5;  // marker radius
const LABEL_SPOTS = [[9, 4, 'start'], [-9, 4, 'end'], [0, -10, 'middle'], [0, 17, 'middle'], [14, -16, 'start'], [-14, -16, 'end'], [14, 24, 'start'], [-14, 24, 'end'], [30, -30, 'start'], [-30, -30, 'end']];
function costTimeChart(plans) {
  // Training: total cost against time to finish. Serving: cost per million tokens against the time per
  // output token (the latency a user feels), since a service has no finish time.
  const training = plans.some((p) => p.seconds_total > 0);
  const ax = training ? { x: (p) => p.seconds_total, y: (p) => p.cost_total ?? p.cost_per_hour, xl: 'time to finish', yl: 'total cost ($)' }
    : { x: (p) => p.tpot_seconds, y: (p) => p.cost_per_million_tokens ?? p.cost_per_hour, xl: 'time per output token', yl: '$ per million tokens' };
  const pts = plans.map((p) => ({ p, x: ax.x(p), y: ax.y(p) })).filter((q) => typeof q.x === 'number' && typeof q.y === 'number' && q.x > 0 && q.y >= 0);
  if (pts.length === 0) return el('p', { class: 'muted', text: 'No time figures in these plans, so no cost-against-time chart.' });
  const W = chartWidth(720), narrow = W < NARROW_CHART_PX;
  const xmax = Math.max(...pts.map((q) => q.x)) * 1.05 || 1, ymax = Math.max(...pts.map((q) => q.y)) * 1.05 || 1;
  // The y axis sits right of its widest tick label and the rotated axis title (Y_TITLE_PX).
  const Y_TITLE_PX = 24;
  const yTicks = [0, 1, 2, 3, 4].map((i) => fmt((ymax * i) / 4, 3));
  const H = narrow ? 320 : 380, L = Math.ceil(Y_TITLE_PX + 10 + Math.max(...yTicks.map((t) => textWidth(t, 11)))), R = narrow ? 12 : 20, T = 20, B = 50;
  const sx = (x) => L + ((W - L - R) * x) / xmax, sy = (y) => H - B - ((H - T - B) * y) / ymax;
  const body = [svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }), svg('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }),
    svg('text', { x: (L + W) / 2, y: H - 10, 'text-anchor': 'middle', class: 'chart-label', text: ax.xl }),
    svg('text', { x: 14, y: (T + H - B) / 2, class: 'chart-label', transform: `rotate(-90 14 ${(T + H - B) / 2})`, 'text-anchor': 'middle', text: ax.yl })];
  for (let i = 0; i <= 4; ++i) {
    // The last tick ends at the axis' end ('middle' put half of "83.1 m" past the SVG's edge); the first
    // starts at the axis, right of the y axis' "0" (centred, the two overlapped).
    // A phone's axis has room for every other x tick only.
    if (!narrow || i % 2 === 0) body.push(svg('text', { x: sx((xmax * i) / 4), y: H - B + 16, 'text-anchor': i === 4 ? 'end' : i === 0 ? 'start' : 'middle', class: 'tick', text: seconds((xmax * i) / 4) }));
    body.push(svg('text', { x: L - 6, y: sy((ymax * i) / 4) + 4, 'text-anchor': 'end', class: 'tick', text: yTicks[i] }));
  }
  const front = paretoFront(pts).sort((a, b) => a.x - b.x || a.y - b.y);
  const onFront = new Set(front);
  if (front.length > 1) body.push(svg('polyline', { points: front.map((q) => `${sx(q.x)},${sy(q.y)}`).join(' '), class: 'pareto' }));
  pts.forEach((q, i) => {
    const title = svg('title', { text: `${q.p.offer || q.p.target}: ${seconds(q.x)}, ${fmt(q.y)}${q.p.meets_goal === false ? ' (misses the goal)' : ''}${onFront.has(q) ? ' (on the Pareto front)' : ''}` });
    const data = { 'data-plan': i, 'data-x': q.x, 'data-y': q.y, 'data-front': onFront.has(q) ? 'true' : 'false' };
    body.push(q.p.meets_goal === false
      ? svg('rect', { x: sx(q.x) - 4, y: sy(q.y) - 4, width: 8, height: 8, class: 'pt miss', ...data }, title)
      : svg('circle', { cx: sx(q.x), cy: sy(q.y), r: PT_R, class: `pt meet${onFront.has(q) ? ' on-front' : ''}`, ...data }, title));
  });
  // Labels of the front's points: boxes kept clear of every marker and of each other.
  const taken = pts.map((q) => ({ l: sx(q.x) - PT_R - 1, r: sx(q.x) + PT_R + 1, t: sy(q.y) - PT_R - 1, b: sy(q.y) + PT_R + 1 }));
  const clash = (bx) => bx.l < L + 2 || bx.r > W || bx.t < 0 || bx.b > H - B - 2 || taken.some((o) => bx.l < o.r && bx.r > o.l && bx.t < o.b && bx.b > o.t);
  let labelled = 0;
  for (const q of front) {
    const text = `${q.p.provider ? `${q.p.provider} ` : ''}${q.p.target || q.p.offer || ''}`.trim();
    const w = textWidth(text, 11), px = sx(q.x), py = sy(q.y);
    for (const [dx, dy, anchor] of LABEL_SPOTS) {
      const x0 = anchor === 'start' ? px + dx : anchor === 'end' ? px + dx - w : px + dx - w / 2;
      const bx = { l: x0 - 1, r: x0 + w + 1, t: py + dy - 11, b: py + dy + 3 };
      if (clash(bx)) continue;
      if (Math.abs(dx) > 9 || Math.abs(dy) > 17) {
        body.push(svg('line', { x1: px, y1: py, x2: anchor === 'end' ? bx.r : anchor === 'start' ? bx.l : px, y2: dy < 0 ? bx.b : bx.t, class: 'leader' }));
      }
      body.push(svg('text', { x: px + dx, y: py + dy, 'text-anchor': anchor, class: 'pt-label tick', text }));
      taken.push(bx);
      ++labelled;
      break;
    }
  }
  const frontSays = front.length > 1 ? `the dashed line joins the ${front.length} plans on the Pareto front (ringed; none cheaper and faster)`
    : 'one plan is both cheapest and fastest (ringed): the Pareto front is that point';
  return el('figure', { class: 'chart-box' }, el('figcaption', { text: `Cost against time (${ax.yl} against ${ax.xl}): circles meet the goal, squares miss it; ${frontSays}; ${labelled} of ${front.length} labelled, the rest on hover` }),
    svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart cost-time', role: 'img', 'aria-label': `Cost against time for ${pts.length} plans; on the Pareto front: ${front.map((q) => q.p.offer || q.p.target).join(', ')}` }, ...body));
}

// What a renter compares across targets: for each target (and MIG slice) among the plans that meet the
// goal, its cheapest plan's $ per million tokens and tokens/s per dollar-hour, the offer behind each bar
// named below the chart. Serving only (a training plan's figure is its total, in the table).
function perTargetCharts(plans) {
  const best = new Map();
  for (const p of plans) {
    if (p.meets_goal === false || typeof p.cost_per_million_tokens !== 'number' || !p.target) continue;
    const b = best.get(p.target);
    if (!b || p.cost_per_million_tokens < b.cost_per_million_tokens) best.set(p.target, p);
  }
  const rows = [...best.values()].sort((a, b) => a.cost_per_million_tokens - b.cost_per_million_tokens);
  if (rows.length === 0) return null;
  const perDollar = (p) => (p.cost_per_hour > 0 && typeof p.tokens_per_second === 'number' ? p.tokens_per_second / p.cost_per_hour : null);
  const metrics = [{ name: '$ per million tokens at the requested rate', unit: 'USD', values: rows.map((p) => p.cost_per_million_tokens) },
    { name: 'tokens/s per dollar-hour', unit: 'tokens/s per $/h', values: rows.map(perDollar) }];
  return el('figure', { class: 'chart-box per-target' }, el('figcaption', { text: 'Per target: the cheapest plan of each that meets the goal' }),
    barChart('Cost per token per target', metrics, rows.map((p) => p.target)),
    el('p', { class: 'muted offers-behind', text: `Offers behind the bars: ${rows.map((p) => `${p.target}: ${p.offer} (${p.provider || ''}${p.region ? `, ${p.region}` : ''}, ${money(p.cost_per_hour)}/h)`).join('; ')}.` }));
}

// The offers gpuplan plans over: the shipped snapshot (or the server's --offers file) and, on a server
// with a store, the market's live offers beside them; filterable.
function offersSection(haveOffers) {
  const box = el('section', { class: 'offers', 'aria-labelledby': 'offers-h' }, el('h3', { id: 'offers-h', text: 'Offers' }));
  if (!haveOffers) return add(box, unavailable('The offers list (GET /api/v1/offers)'));
  const gpuSel = el('select', { id: 'offers-gpu' }, el('option', { value: '', text: 'any GPU' }));
  const spot = el('input', { type: 'checkbox', id: 'offers-spot' });
  const provider = el('input', { id: 'offers-provider', placeholder: 'e.g. lambda', autocomplete: 'off' });
  const st = liveStatus();
  const tableBox = el('div', { class: 'table-wrap' });
  let seq = 0;
  const load = async () => {
    const mine = ++seq;
    const q = new URLSearchParams();
    if (gpuSel.value) q.set('gpu', gpuSel.value);
    if (spot.checked) q.set('spot', 'true');
    if (provider.value.trim()) q.set('provider', provider.value.trim());
    st.textContent = 'Loading offers…';
    const r = await api(`/offers?${q}`);
    if (mine !== seq) return;
    if (!r.ok) { clear(tableBox, errorBox(r.error)); st.textContent = ''; return; }
    // Offers files and the market's live offers are one list: a market row has source "market", its
    // live `available` count, and `demo` when it is the demo inventory's (shown as demo data).
    const rows = (r.data.offers || []).map((o) => ({ ...o, origin: o.source === 'market' ? 'live' : 'file' }));
    const live = rows.filter((o) => o.origin === 'live').length;
    const demo = rows.filter((o) => o.demo).length;
    st.textContent = `${rows.length} offers${live ? `, ${live} live from the market` : ''}${r.data.now ? ` (file prices as captured; today ${r.data.now})` : ''}.`;
    const note = demo ? el('p', { class: 'demo-note', id: 'offers-demo-note', role: 'note' },
      el('span', { class: 'demo-badge', text: 'demo data' }),
      ` ${demo} of the live offers are the demo inventory of make run: not real GPUs, for trying the market out.`) : null;
    clear(tableBox, note, sortableTable([
      { key: 'provider', label: 'Provider' }, { key: 'region', label: 'Region' }, { key: 'name', label: 'Offer', render: (o) => [o.name, proxyMark(o)] },
      // A MIG target may break after its '/' (a100-40gb-sxm4/3g.20gb would widen the table past its box).
      { key: 'target', label: 'GPU', render: (o) => el('a', { href: `#/gpu/${o.target}` }, o.target.split('/').map((p, i) => (i ? [el('wbr'), `/${p}`] : p))) },
      { key: 'gpus', label: 'GPUs', num: true },
      { key: 'price_hour', label: 'Per hour ($)', num: true },
      { key: 'price_per_gpu_hour', label: 'Per GPU-hour ($)', num: true },
      { key: 'spot_price_hour', label: 'Spot per hour ($)', num: true },
      { key: 'origin', label: 'Source (captured)', render: (o) => o.origin === 'live'
        ? marketMarks(o) : [o.captured_at || 'file', priceWarning(o) || (o.stale ? ' (stale)' : '')] },
    ], rows.slice(0, 200), {
      caption: 'Offers from files and the market, cheapest per GPU-hour first (200 at most shown)', sortKey: 'price_per_gpu_hour',
      rowAttrs: (o) => ({ class: [o.origin === 'live' ? 'offer-market' : 'offer-file', o.demo ? 'offer-demo' : ''].join(' ').trim() }),
    }));
  };
  gpuList().then((gpus) => {
    for (const g of gpus.filter((x) => !x.mig_profile)) gpuSel.append(el('option', { value: g.id, text: g.name }));
  });
  gpuSel.addEventListener('change', load);
  spot.addEventListener('change', load);
  provider.addEventListener('change', load);
  add(box, el('form', { class: 'filters', 'aria-label': 'Filter offers', onsubmit: (e) => { e.preventDefault(); load(); } },
    el('label', { for: 'offers-gpu', text: 'GPU ' }), gpuSel,
    el('label', { for: 'offers-provider', text: 'Provider ' }), provider,
    el('label', { class: 'check' }, spot, ' Spot prices')), st, tableBox);
  load();
  return box;
}
