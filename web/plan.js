// Plan: where to rent it. Offers (the shipped snapshot or an uploaded file), the recommended plan
// with its reasons, every plan considered, and a chart of cost against time.
import { add, api, clear, commands, declaredDefault, el, errorBox, fmt, gpuList, isUnavailable, liveStatus, readFile, seconds, sortableTable, svg, taskInfo, unavailable, vocabulary, words } from './ui.js';

let form, out, status, vocab, offersText = null, offersName = '', trainTask;

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
  // The training goal runs the library's full-training task: the first task that trains without an adapter.
  const full = (vocab.tasks || []).find((t) => t.training && !t.adapter);
  trainTask = full ? full.name : undefined;
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
  const goal = el('select', { id: 'plan-goal', name: 'goal' }, el('option', { value: 'serve', text: 'serve requests' }), el('option', { value: trainTask || 'train-goal', text: 'train or fine-tune' }));
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
  goal.addEventListener('change', () => { serve.hidden = goal.value !== 'serve'; train.hidden = goal.value === 'serve'; });
  form = el('form', { class: 'workload', 'aria-label': 'Plan request', onsubmit: (e) => { e.preventDefault(); run(); } },
    el('fieldset', {}, el('legend', { text: 'Workload' }),
      el('label', {}, 'Model ', el('select', { id: 'plan-model', name: 'model' }, (models.ok ? models.data.models : []).map((m) => el('option', { value: m.id, text: m.id, selected: m.id === 'llama-2-7b' })))),
      el('label', {}, 'Weights ', el('input', { id: 'plan-weights', name: 'weights', value: taskInfo(vocab, declaredDefault(vocab, 'task')).weights || '' })),
      el('label', {}, 'Goal ', goal)),
    serve, train,
    el('fieldset', {}, el('legend', { text: 'Offers' }),
      el('label', { for: 'plan-offers', text: 'Offers file (default: the shipped snapshot) ' }), offers,
      el('label', {}, 'Objective ', el('select', { id: 'plan-objective', name: 'objective' },
        words(vocab, 'objective').map((o) => el('option', { value: o, text: `minimise ${o}`, selected: o === declaredDefault(vocab, 'objective') })))),
      el('label', { class: 'check' }, el('input', { type: 'checkbox', id: 'plan-spot', name: 'spot' }), ' Allow spot'),
      el('label', {}, 'Show ', num('plan-top', 'top', 10, { step: 1, min: 1 }), ' plans')),
    el('button', { type: 'submit', text: 'Plan' }));
  add(panel, el('p', { class: 'lead', text: 'For each offer gpuplan sizes the deployment (count, tensor and pipeline degree, replicas, batch), keeps what meets the goal and ranks by cost or time. Every rejected offer says why.' }), form, status, out, offersBox);
}

function request() {
  const v = (id) => form.querySelector(`#${id}`).value.trim();
  const n = (id) => (v(id) === '' ? undefined : Number(v(id)));
  const req = { model: v('plan-model'), weights: v('plan-weights') || undefined, objective: v('plan-objective'), top: n('plan-top') };
  if (form.querySelector('#plan-spot').checked) req.spot = true;
  if (v('plan-goal') === 'serve') Object.assign(req, { rate: n('plan-rate'), input_tokens: n('plan-in'), output_tokens: n('plan-out'), ttft_slo: n('plan-ttft'), tpot_slo: n('plan-tpot') });
  else Object.assign(req, { task: trainTask, train_tokens: n('plan-train'), deadline: v('plan-deadline') || undefined, budget: n('plan-budget') });
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
  status.textContent = `${plans.length} plans.`;
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
      el('p', {}, el('strong', { text: `${best.provider || ''} ${best.offer || ''}`.trim() }), marketMarks(best), best.region ? ` in ${best.region}` : '', `: ${best.gpus || 1} × ${best.target}`,
        best.tp ? `, tensor parallel ${best.tp}` : '', best.pp > 1 ? `, pipeline ${best.pp}` : '', best.replicas ? `, ${best.replicas} replica(s)` : '', best.batch ? `, batch ${best.batch}` : ''),
      el('ul', {},
        el('li', { text: `Cost: ${money(best.cost_per_hour)} per hour${finite && typeof best.cost_total === 'number' ? `, ${money(best.cost_total)} in total` : ''}${typeof best.cost_per_million_tokens === 'number' ? `, ${money(best.cost_per_million_tokens)} per million tokens` : ''}` }),
        typeof best.seconds_total === 'number' && best.seconds_total > 0 ? el('li', { text: `Time: ${seconds(best.seconds_total)}` }) : null,
        best.ttft_seconds > 0 ? el('li', { text: `Latency: first token ${seconds(best.ttft_seconds)}, then ${seconds(best.tpot_seconds)} per token; ${fmt(best.tokens_per_second)} tokens/s` }) : null,
        best.capacity_requests_per_second > 0 ? el('li', { text: `Capacity: ${fmt(best.capacity_requests_per_second)} requests/s` }) : null,
        best.reason ? el('li', { text: `Why: ${best.reason}` }) : null)));
  } else {
    res.push(el('p', { class: 'notice', text: 'No offer meets the goal; the table says why for each.' }));
  }
  res.push(costTimeChart(plans, d.pareto || []));
  if ((d.rejected || []).length) {
    res.push(el('details', { class: 'rejected' }, el('summary', { text: `${d.rejected.length} offers rejected, each with its reason` }),
      el('ul', {}, d.rejected.map((r) => el('li', {}, el('code', { text: r.offer }), r.target ? ` (${r.target})` : '', `: ${r.reason}`)))));
  }
  res.push(el('div', { class: 'table-wrap' }, el('table', { class: 'data plans' },
    el('caption', { text: finite ? 'Plans considered' : 'Plans considered (no total: a service runs until stopped, so its cost is per hour and per million tokens)' }),
    el('thead', {}, el('tr', {}, ['Offer', 'Provider', 'Region', 'Target', 'GPUs', 'TP', 'PP', 'Replicas', 'Batch', 'Per hour', finite ? 'Total' : null, 'Per M tokens', 'Time', 'Meets goal', 'Reason'].filter(Boolean).map((h) => el('th', { scope: 'col', text: h })))),
    el('tbody', {}, plans.map((p) => el('tr', {},
      el('th', { scope: 'row' }, p.offer || '', marketMarks(p)), el('td', { text: p.provider || '' }), el('td', { text: p.region || '' }), el('td', { text: p.target || '' }),
      ['gpus', 'tp', 'pp', 'replicas', 'batch'].map((k) => el('td', { class: 'num', text: fmt(p[k]) })),
      el('td', { class: 'num', text: money(p.cost_per_hour) }), finite ? el('td', { class: 'num', text: money(p.cost_total) }) : null, el('td', { class: 'num', text: money(p.cost_per_million_tokens) }),
      el('td', { class: 'num time', text: p.seconds_total > 0 ? seconds(p.seconds_total) : typeof p.tpot_seconds === 'number' ? `${seconds(p.tpot_seconds)}/token` : '–' }),
      el('td', { text: p.meets_goal === false ? '✗ no' : '✓ yes' }), el('td', { text: p.reason || '' })))))));
  return res;
}

// A market offer's (or plan's) marks: "live" with the count free now, and "demo data" for the demo
// inventory's; nothing for a file's offer.
function marketMarks(o) {
  if (o.source !== 'market') return null;
  return el('span', { class: 'offer-live' }, ' ', el('span', { class: 'live-badge', text: 'live' }),
    ` ${fmt(o.available)} available`, o.demo ? el('span', { class: 'demo-badge', text: 'demo data' }) : null);
}

// Cost (y) against time (x), one marker per plan; the Pareto front joined by a line. Markers differ by
// shape (met goal: filled circle; missed: hollow square), so the chart reads without colour.
function costTimeChart(plans, pareto) {
  // Training: total cost against time to finish. Serving: cost per million tokens against the time per
  // output token (the latency a user feels), since a service has no finish time.
  const training = plans.some((p) => p.seconds_total > 0);
  const ax = training ? { x: (p) => p.seconds_total, y: (p) => p.cost_total ?? p.cost_per_hour, xl: 'time to finish', yl: 'total cost ($)' }
    : { x: (p) => p.tpot_seconds, y: (p) => p.cost_per_million_tokens ?? p.cost_per_hour, xl: 'time per output token', yl: '$ per million tokens' };
  const pts = plans.map((p) => ({ p, x: ax.x(p), y: ax.y(p) })).filter((q) => typeof q.x === 'number' && typeof q.y === 'number' && q.x > 0 && q.y >= 0);
  if (pts.length === 0) return el('p', { class: 'muted', text: 'No time figures in these plans, so no cost-against-time chart.' });
  const W = 720, H = 360, L = 80, R = 20, T = 20, B = 50;
  const xmax = Math.max(...pts.map((q) => q.x)) * 1.05 || 1, ymax = Math.max(...pts.map((q) => q.y)) * 1.05 || 1;
  const sx = (x) => L + ((W - L - R) * x) / xmax, sy = (y) => H - B - ((H - T - B) * y) / ymax;
  const body = [svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }), svg('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }),
    svg('text', { x: (L + W) / 2, y: H - 10, 'text-anchor': 'middle', class: 'chart-label', text: ax.xl }),
    svg('text', { x: 14, y: (T + H - B) / 2, class: 'chart-label', transform: `rotate(-90 14 ${(T + H - B) / 2})`, 'text-anchor': 'middle', text: ax.yl })];
  for (let i = 0; i <= 4; ++i) {
    // The last tick ends at the axis' end ('middle' put half of "83.1 m" past the SVG's edge).
    body.push(svg('text', { x: sx((xmax * i) / 4), y: H - B + 16, 'text-anchor': i === 4 ? 'end' : 'middle', class: 'tick', text: seconds((xmax * i) / 4) }),
      svg('text', { x: L - 6, y: sy((ymax * i) / 4) + 4, 'text-anchor': 'end', class: 'tick', text: fmt((ymax * i) / 4, 3) }));
  }
  const front = pareto.map((p) => ({ x: ax.x(p), y: ax.y(p) })).filter((q) => typeof q.x === 'number' && typeof q.y === 'number' && q.x > 0).sort((a, b) => a.x - b.x);
  if (front.length > 1) body.push(svg('polyline', { points: front.map((q) => `${sx(q.x)},${sy(q.y)}`).join(' '), class: 'pareto' }));
  for (const q of pts) {
    const title = svg('title', { text: `${q.p.offer || q.p.target}: ${seconds(q.x)}, ${fmt(q.y)}${q.p.meets_goal === false ? ' (misses the goal)' : ''}` });
    body.push(q.p.meets_goal === false
      ? svg('rect', { x: sx(q.x) - 4, y: sy(q.y) - 4, width: 8, height: 8, class: 'pt miss' }, title)
      : svg('circle', { cx: sx(q.x), cy: sy(q.y), r: 5, class: 'pt meet' }, title));
  }
  return el('figure', { class: 'chart-box' }, el('figcaption', { text: `Cost against time (${ax.yl} against ${ax.xl}): circles meet the goal, squares miss it; the dashed line is the Pareto front` }),
    svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': `Cost against time for ${pts.length} plans` }, ...body));
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
      { key: 'provider', label: 'Provider' }, { key: 'region', label: 'Region' }, { key: 'name', label: 'Offer' },
      { key: 'target', label: 'GPU', render: (o) => el('a', { href: `#/gpu/${o.target}`, text: o.target }) },
      { key: 'gpus', label: 'GPUs', num: true },
      { key: 'price_hour', label: 'Per hour ($)', num: true },
      { key: 'price_per_gpu_hour', label: 'Per GPU-hour ($)', num: true },
      { key: 'spot_price_hour', label: 'Spot per hour ($)', num: true },
      { key: 'origin', label: 'Source (captured)', render: (o) => o.origin === 'live'
        ? marketMarks(o) : `${o.captured_at || 'file'}${o.stale ? ' (stale)' : ''}` },
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
