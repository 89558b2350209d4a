// Rent: sign in with a token, describe the workload (or arrive from Fit or Plan with it filled in:
// #/rent?model=...&rate=...), see only the market's live offers where it fits and meets the goal,
// cheapest first, rent one with a confirmation that states the frozen price, and follow "My rentals":
// state, time running, cost so far (ticking), stop, start, delete and each rental's events.
import { add, api, clear, commands, declaredDefault, dollars, el, errorBox, errorSlot, fmt, freshKey, gpuDetail, isUnavailable,
  labelCells, liveStatus, signInBox, taskInfo, token, unavailable, vocabulary } from './ui.js';
import { sliceDiagram } from './mig.js';

// How many plans to ask for: every live offer of a demo-sized market, and bounded (the plan's `top`).
const PLANS_ASKED = 50;
// How often the cost and time of running rentals are redrawn, in milliseconds (the charge is per second).
const TICK_MS = 1000;

let vocab, form, findStatus, findError, results, confirmBox, rentStatus, rentalsBox, rentalsStatus, rentalsError;
let lastRequest = null, rentals = [], usageBy = new Map(), fetchedAt = 0, ticker = null;
const openEvents = new Set();

// Whether this server's vocabulary declares `key` for `command` (feature detection: an older server
// lacks it and the page does without).
function declares(command, key) {
  return (vocab.options || []).some((o) => o.name === key && (o.commands || []).includes(command));
}

export async function init(panel, r) {
  const have = await commands();
  vocab = await vocabulary();
  add(panel, el('h2', { text: 'Rent what fits' }));
  if (!have.includes('plan')) { add(panel, unavailable('Renting by workload (POST /api/v1/plan)')); return; }
  const models = await api('/models');
  const num = (id, name, value, extra = {}) => el('input', { type: 'number', id, name, value, min: 0, step: 'any', ...extra });
  findStatus = liveStatus();
  findError = errorSlot('rent-find-error');
  results = el('div', { class: 'rent-results' });
  form = el('form', { class: 'workload', id: 'rent-form', 'aria-label': 'Workload to rent for', onsubmit: (e) => { e.preventDefault(); find(); } },
    el('fieldset', {}, el('legend', { text: 'Workload' }),
      el('label', {}, 'Model ', el('select', { id: 'rent-model', name: 'model' },
        (models.ok ? models.data.models : []).map((m) => el('option', { value: m.id, text: m.id, selected: m.id === 'llama-2-7b' })))),
      el('label', {}, 'Weights ', el('input', { id: 'rent-weights', name: 'weights', value: taskInfo(vocab, declaredDefault(vocab, 'task')).weights || '', autocomplete: 'off' })),
      el('label', {}, 'Requests/s ', num('rent-rate', 'rate', 2)),
      el('label', {}, 'Input tokens ', num('rent-in', 'input_tokens', 1024)),
      el('label', {}, 'Output tokens ', num('rent-out', 'output_tokens', 256)),
      el('label', {}, 'First-token target (s) ', num('rent-ttft', 'ttft_slo', '')),
      el('label', {}, 'Per-token target (s) ', num('rent-tpot', 'tpot_slo', ''))),
    el('button', { type: 'submit', id: 'rent-find', text: 'Find live offers that fit' }), findError.node);
  confirmBox = el('div', { class: 'rent-confirm', id: 'rent-confirm', hidden: true, role: 'dialog', 'aria-modal': 'false', 'aria-labelledby': 'rent-confirm-h' });
  rentStatus = liveStatus();
  rentStatus.id = 'rent-status';
  rentalsStatus = liveStatus();
  rentalsError = errorSlot('rentals-error');
  rentalsBox = el('div', { class: 'table-wrap rentals-box' });
  const signIn = signInBox('rent', () => loadRentals());
  add(panel,
    el('p', { class: 'lead', text: 'Only the offers available now on this server\'s market, and only those where the model fits and meets the goal, ranked by what they cost per hour. The price is frozen when you rent.' }),
    signIn, form, findStatus, results, confirmBox, rentStatus,
    el('section', { class: 'my-rentals', 'aria-labelledby': 'rentals-h' },
      el('h3', { id: 'rentals-h', text: 'My rentals' }),
      el('p', {}, el('button', { type: 'button', id: 'rentals-refresh', text: 'Refresh', onclick: () => loadRentals() }), rentalsError.node),
      rentalsStatus, rentalsBox));
  fill(r.params);
  loadRentals();
  if (r.params && r.params.get('model')) await find();
}

export async function route(panel, r) {
  if (!form || !r.params || !r.params.get('model')) return;
  if (fill(r.params)) await find();
}

// Fills the form from a "Rent this" link's parameters; true when anything changed.
function fill(params) {
  if (!params) return false;
  let changed = false;
  const set = (id, key) => {
    const v = params.get(key);
    if (v === null) return;
    const input = form.querySelector(`#${id}`);
    if (input.tagName === 'SELECT' && ![...input.options].some((o) => o.value === v)) input.append(el('option', { value: v, text: v }));
    if (input.value !== v) { input.value = v; changed = true; }
  };
  [['rent-model', 'model'], ['rent-weights', 'weights'], ['rent-rate', 'rate'], ['rent-in', 'input_tokens'], ['rent-out', 'output_tokens'],
    ['rent-ttft', 'ttft_slo'], ['rent-tpot', 'tpot_slo']].forEach(([id, key]) => set(id, key));
  return changed;
}

function request() {
  const v = (id) => form.querySelector(`#${id}`).value.trim();
  const n = (id) => (v(id) === '' ? undefined : Number(v(id)));
  const req = { model: v('rent-model'), weights: v('rent-weights') || undefined, rate: n('rent-rate'), input_tokens: n('rent-in'),
    output_tokens: n('rent-out'), ttft_slo: n('rent-ttft'), tpot_slo: n('rent-tpot'), top: PLANS_ASKED };
  // Only the market's live offers, where this server can say so (else the plans are filtered below).
  if (declares('plan', 'source')) req.source = 'market';
  for (const k of Object.keys(req)) if (req[k] === undefined) delete req[k];
  return req;
}

async function find() {
  const req = request();
  findStatus.textContent = 'Looking for live offers that fit…';
  const r = await api('/plan', req);
  if (isUnavailable(r)) { findError.show(r.error); findStatus.textContent = ''; return; }
  if (!r.ok) { findError.show(r.error); findStatus.textContent = 'Not searched: see the error beside the button.'; return; }
  findError.clear();
  lastRequest = req;
  const fits = (r.data.plans || []).filter((p) => p.source === 'market' && p.meets_goal !== false);
  findStatus.textContent = fits.length
    ? `${fits.length} live offer${fits.length === 1 ? '' : 's'} fit and meet the goal; the cheapest first.`
    : 'No live offer fits this workload and meets the goal now.';
  const rejected = (r.data.rejected || []).filter((x) => !x.source || x.source === 'market');
  clear(results, await fitsTable(fits), rejected.length && fits.length === 0
    ? el('ul', { class: 'rent-rejected' }, rejected.slice(0, 20).map((x) => el('li', {}, el('code', { text: x.offer }), x.target ? ` (${x.target})` : '', `: ${x.reason}`)))
    : null);
}

// The slice an offer sells, drawn on its GPU's memory slices (at the first start the driver allows).
async function sliceOf(target) {
  const [gpu, profile] = String(target || '').split('/');
  if (!profile) return null;
  const d = await gpuDetail(gpu);
  const p = d && d.mig && (d.mig.profiles || []).find((x) => x.name === profile);
  if (!p) return null;
  const start = (p.placements || [])[0] ? p.placements[0].start : 0;
  return sliceDiagram(d.mig.memory_slices, [{ name: profile, detail: `${p.compute_slices}/${d.mig.compute_slices} compute`, start, size: p.memory_slices }],
    `${profile}: ${p.memory_slices} of ${d.mig.memory_slices} memory slices of one ${gpu}`);
}

// What the offer's GPUs measured (PUT /agent/bench, issue #16): "measured: 92 % of bf16 dense peak,
// 1.71 TB/s, PCIe Gen4 x16", with the method and date in the title. null when nothing was measured.
export function measuredNote(m) {
  if (!m) return null;
  const parts = [];
  if (m.ratio_to_datasheet) parts.push(`${Math.round(m.ratio_to_datasheet * 100)} % of bf16 dense peak`);
  if (m.memory_gbps) parts.push(`${(m.memory_gbps / 1000).toFixed(2)} TB/s`);
  if (m.pcie_gen) parts.push(`PCIe Gen${m.pcie_gen}${m.pcie_width ? ` x${m.pcie_width}` : ''}`);
  if (!parts.length) return null;
  return el('span', { class: 'measured-note', title: `${m.method || 'measured'}, ${m.measured_at || ''}`, text: `measured: ${parts.join(', ')}` });
}

async function fitsTable(fits) {
  if (!fits.length) return null;
  const slices = await Promise.all(fits.map((p) => sliceOf(p.target)));
  return el('div', { class: 'table-wrap' }, labelCells(el('table', { class: 'data rent-fits' },
    el('caption', { text: 'Live offers where it fits and meets the goal' }),
    el('thead', {}, el('tr', {}, ['Offer', 'What', 'Per hour', 'Per million tokens', 'Tokens/s', 'Available', ''].map((h) => el('th', { scope: 'col', text: h })))),
    el('tbody', {}, fits.map((p, i) => el('tr', { 'data-offer': p.offer, class: i === 0 ? 'cheapest' : '' },
      el('th', { scope: 'row' }, el('code', { text: p.offer }), el('br'), `${p.provider || ''}${p.region ? `, ${p.region}` : ''}`,
        p.demo ? el('span', { class: 'demo-badge', text: 'demo data' }) : null,
        i === 0 ? el('span', { class: 'cheapest-badge', text: 'cheapest fit' }) : null, measuredNote(p.measured)),
      el('td', { class: 'rent-what' }, el('a', { href: `#/gpu/${p.target}`, text: p.target }), (p.instances || 1) > 1 ? ` × ${p.instances}` : '',
        p.tp > 1 ? `, tensor parallel ${p.tp}` : '', slices[i]),
      el('td', { class: 'num', text: dollars(p.cost_per_hour) }),
      el('td', { class: 'num', text: dollars(p.cost_per_million_tokens, 4) }),
      el('td', { class: 'num', text: fmt(p.tokens_per_second) }),
      el('td', { class: 'num', text: fmt(p.available) }),
      el('td', {}, el('button', { type: 'button', class: 'rent-button', 'aria-label': `Rent ${p.target} (${p.offer})`, text: 'Rent…', onclick: () => confirm(p, i === 0) }))))))));
}

// The confirmation: what is rented, from whom, and the price frozen for the rental's life.
function confirm(p, best) {
  const slot = errorSlot('rent-confirm-error');
  const units = p.instances || 1;
  const go = el('button', { type: 'button', id: 'rent-confirm-go', text: `Rent at ${dollars(p.cost_per_hour)}/h` });
  const cancel = el('button', { type: 'button', id: 'rent-confirm-cancel', text: 'Cancel', onclick: () => { confirmBox.hidden = true; } });
  go.addEventListener('click', async () => {
    if (!token()) { slot.show({ message: 'Sign in with your API token first (the box above).', field: 'token' }); return; }
    go.disabled = true;
    // TODO(lead, #14 h-mplan): the server's `{"plan": <plan request>}` rents the recommended plan all
    // or nothing; this page uses it (pinned to the confirmed offer where plan takes `offer`) once the
    // vocabulary declares it, and rents the offer by id otherwise (what every server since #13 has).
    const body = best && declares('market.rent', 'plan') && lastRequest
      ? { plan: declares('plan', 'offer') ? { ...lastRequest, offer: p.offer } : lastRequest, idempotency_key: freshKey() }
      : { offer: p.offer, count: units, idempotency_key: freshKey() };
    const r = await api('/rentals', body, { auth: true });
    go.disabled = false;
    if (!r.ok) { slot.show(r.error); return; }
    confirmBox.hidden = true;
    const made = Array.isArray(r.data.rentals) ? r.data.rentals : [r.data];
    rentStatus.textContent = `Rented ${made.map((x) => `${x.id} at ${dollars(x.price_per_hour)}/h`).join(', ')}.`;
    await loadRentals();
    find();
  });
  clear(confirmBox,
    el('h3', { id: 'rent-confirm-h', text: 'Rent this?' }),
    el('p', { class: 'rent-confirm-text' }, `${units} × `, el('strong', { text: p.target }), ` from ${p.provider || 'the provider'}${p.region ? ` in ${p.region}` : ''} (offer `,
      el('code', { text: p.offer }), `) at `, el('strong', { class: 'frozen-price', text: `${dollars(p.cost_per_hour)} per hour` }), '.'),
    el('p', { text: 'This price is frozen for the life of the rental: later price changes do not touch it. It is billed per second while the rental runs; stop it to stop the bill.' }),
    el('p', {}, go, ' ', cancel), slot.node);
  confirmBox.onkeydown = (e) => { if (e.key === 'Escape') { confirmBox.hidden = true; } };
  confirmBox.hidden = false;
  go.focus();
}

async function loadRentals() {
  if (!rentalsBox) return;
  if (!token()) {
    rentals = [];
    clear(rentalsBox, el('p', { class: 'muted', text: 'Sign in with a renter\'s token to see your rentals.' }));
    rentalsStatus.textContent = '';
    return;
  }
  rentalsStatus.textContent = 'Loading your rentals…';
  const [lr, ur] = await Promise.all([api('/rentals', undefined, { auth: true }), api('/usage', undefined, { auth: true })]);
  if (!lr.ok) { rentalsError.show(lr.error); rentalsStatus.textContent = 'Not loaded: see the error beside Refresh.'; return; }
  rentalsError.clear();
  rentals = lr.data.rentals || [];
  usageBy = new Map(((ur.ok && ur.data.rentals) || []).map((u) => [u.rental_id, u]));
  fetchedAt = Date.now();
  rentalsStatus.textContent = `${rentals.length} rental${rentals.length === 1 ? '' : 's'}${ur.ok ? `; charged so far ${dollars(ur.data.charge, 6)}` : ''}.`;
  drawRentals();
}

// An open usage segment means it runs and bills now.
function running(u) { return !!(u && (u.segments || []).some((s) => s.ended_at_ms === null || s.ended_at_ms === undefined)); }

function drawRentals() {
  if (!rentals.length) { clear(rentalsBox, el('p', { class: 'muted', text: 'No rentals yet.' })); return; }
  clear(rentalsBox, labelCells(el('table', { class: 'data rentals' },
    el('caption', { text: 'Your rentals: time running and cost so far count up while one runs' }),
    el('thead', {}, el('tr', {}, ['Rental', 'What', 'State', 'Time running', 'Cost so far', 'Price (frozen)', 'Actions'].map((h) => el('th', { scope: 'col', text: h })))),
    el('tbody', {}, rentals.map((x) => rentalRow(x))))));
  tick();
  if (!ticker) ticker = setInterval(tick, TICK_MS);
}

function rentalRow(x) {
  const slot = errorSlot(`rental-error-${x.id}`);
  const act = (label, path, method) => el('button', { type: 'button', class: `rental-${label.toLowerCase()}`, text: label,
    'aria-label': `${label} ${x.id}`,
    onclick: async (e) => {
      const b = e.currentTarget;  // null once the event is dispatched: keep the button
      b.disabled = true;
      const r = await api(`/rentals/${encodeURIComponent(x.id)}${path}`, undefined, { auth: true, method });
      if (!r.ok) { b.disabled = false; slot.show(r.error); return; }
      await loadRentals();
    } });
  const events = el('details', { class: 'rental-events', 'data-rental': x.id, open: openEvents.has(x.id) || undefined },
    el('summary', { text: 'Events' }), el('div', { class: 'events-body' }));
  events.addEventListener('toggle', () => {
    if (events.open) { openEvents.add(x.id); loadEvents(x.id, events.querySelector('.events-body')); } else openEvents.delete(x.id);
  });
  if (openEvents.has(x.id)) loadEvents(x.id, events.querySelector('.events-body'));
  return el('tr', { 'data-rental': x.id },
    el('th', { scope: 'row' }, el('code', { text: x.id })),
    el('td', { text: `${x.count > 1 ? `${x.count} × ` : ''}${x.target}` }),
    el('td', { class: 'rental-state', text: x.state }),
    el('td', { class: 'num rental-time', 'data-rental': x.id }),
    el('td', { class: 'num rental-cost', 'data-rental': x.id }),
    el('td', { class: 'num', text: `${dollars(x.price_per_hour)}/h` }),
    el('td', { class: 'rental-actions' }, act('Stop', '/stop', 'POST'), ' ', act('Start', '/start', 'POST'), ' ',
      act('Delete', '', 'DELETE'), slot.node, events));
}

async function loadEvents(id, box) {
  const r = await api(`/rentals/${encodeURIComponent(id)}/events`, undefined, { auth: true });
  if (!r.ok) { clear(box, errorBox(r.error)); return; }
  clear(box, el('ol', { class: 'events' }, (r.data.events || []).map((e) => el('li', {},
    el('time', { datetime: new Date(e.at_ms).toISOString(), text: new Date(e.at_ms).toLocaleString() }), ' ',
    `${e.from ? `${e.from} → ` : ''}${e.to}`, e.actor ? ` by ${e.actor}` : '', e.reason ? `: ${e.reason}` : ''))));
}

// Redraws time running and cost so far: the server's figures at the last load plus the time since,
// for the rentals that run (their open segment bills per second at the frozen price).
function tick() {
  if (!rentalsBox || !rentalsBox.isConnected) return;
  const since = (Date.now() - fetchedAt) / 1000;
  for (const x of rentals) {
    const u = usageBy.get(x.id);
    const on = running(u);
    const secs = (u ? u.billed_seconds : 0) + (on ? since : 0);
    const cost = (u ? u.charge_micros / 1e6 : 0) + (on ? (since * x.price_micros_per_hour) / 1e6 / 3600 : 0);
    const t = rentalsBox.querySelector(`td.rental-time[data-rental="${x.id}"]`);
    const c = rentalsBox.querySelector(`td.rental-cost[data-rental="${x.id}"]`);
    if (t) t.textContent = `${clock(secs)}${on ? ' (running)' : ''}`;
    if (c) c.textContent = dollars(cost, 6);
  }
}

// 3725 s -> "1:02:05".
function clock(secs) {
  const s = Math.max(0, Math.floor(secs));
  const mm = String(Math.floor((s % 3600) / 60)).padStart(2, '0'), ss = String(s % 60).padStart(2, '0');
  return `${Math.floor(s / 3600)}:${mm}:${ss}`;
}
