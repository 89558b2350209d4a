// Small helpers shared by the sections: DOM building, the API client, number formatting, SVG charts.
// Plain ES modules, no build step, nothing fetched from anywhere but this server.

export const SVG_NS = 'http://www.w3.org/2000/svg';

// el('div', {class: 'x', onclick: f}, child, 'text', [more children])
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

function setAttrs(node, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
    else if (k === 'text') node.textContent = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(node, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// Appends children, skipping null, undefined and false (DOM append would print them).
export function add(node, ...children) {
  append(node, children);
  return node;
}

export function clear(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

// Links to sources: only http(s), whatever a user's --catalog file says (no javascript: or data: links).
export function safeUrl(u) {
  return typeof u === 'string' && /^https?:\/\//i.test(u) ? u : null;
}

// The API. Resolves to {ok, status, data, error}; never throws. opts: signal, method (DELETE, or POST
// without a body), auth (send the signed-in token: the market's endpoints), bearer (this token instead).
export async function api(path, body, opts = {}) {
  const init = { headers: { Accept: 'application/json' }, signal: opts.signal };
  if (body !== undefined) {
    init.method = 'POST';
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  if (opts.method) init.method = opts.method;
  if (opts.auth || opts.bearer) {
    const t = opts.bearer || token();
    if (t) init.headers.Authorization = `Bearer ${t}`;
  }
  let res;
  try {
    res = await fetch('/api/v1' + path, init);
  } catch (e) {
    if (e && e.name === 'AbortError') return { ok: false, aborted: true, status: 0, error: { code: 'aborted', message: 'cancelled' } };
    return { ok: false, status: 0, error: { code: 'network', message: 'the server did not answer: ' + e.message } };
  }
  let data = null;
  try {
    data = await res.json();
  } catch {
    data = { error: { code: 'bad_response', message: `HTTP ${res.status} without a JSON body` } };
  }
  return { ok: res.ok, status: res.status, data, error: res.ok ? null : (data && data.error) || { code: 'http', message: `HTTP ${res.status}` } };
}

let health = null;
export async function commands() {
  if (!health) health = api('/health');
  const r = await health;
  return r.ok ? r.data.commands : [];
}

// The library's words (GET /api/v1/vocabulary), fetched once: the options with their defaults and
// ranges, the names of tasks, formats and engines, and each task's defaults. The page hard-codes
// none of them (tests/unit/options_test.cc fails on a name literal in web/*.js).
let vocab = null;
const NO_VOCABULARY = { options: [], vocabularies: {}, tasks: [], mig_profiles: {}, models: [] };
export async function vocabulary() {
  if (!vocab) vocab = api('/vocabulary');
  const r = await vocab;
  return r.ok ? r.data : NO_VOCABULARY;
}
// The names of one vocabulary (task, weights, kv_cache, engine, ...), or [] when unknown.
export function words(v, name) {
  return (v.vocabularies && v.vocabularies[name]) || [];
}
// The declared default of an option, or undefined.
export function declaredDefault(v, name) {
  const o = (v.options || []).find((x) => x.name === name);
  return o ? o.default : undefined;
}
// What the library picks for a task ({name, training, adapter, weights, kv_cache, checkpointing}).
export function taskInfo(v, name) {
  return (v.tasks || []).find((t) => t.name === name) || { name, training: false, adapter: false };
}

// "Not available in this build": for a command the server does not have (404 unknown_command).
export function unavailable(what, error) {
  return el('div', { class: 'notice unavailable', role: 'status' },
    el('strong', { text: `${what} is not available in this build.` }), ' ',
    (error && error.message) || 'This gpuplan binary was built without it; the other sections work.');
}

export function errorBox(error) {
  if (!error) return null;
  return el('div', { class: 'notice error', role: 'alert' },
    el('strong', { text: 'Error: ' }), error.message || String(error),
    error.field ? el('span', { class: 'field', text: ` (field: ${error.field})` }) : null);
}

export function isUnavailable(r) {
  return r && r.status === 404 && r.error && r.error.code === 'unknown_command';
}

export function debounce(fn, ms) {
  let t = null;
  return (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), ms);
  };
}

export function fmt(v, digits = 4) {
  if (v === null || v === undefined || v === '') return '–';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (typeof v !== 'number') return String(v);
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString('en-US');
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e9)) return v.toExponential(2);
  return Number(v.toPrecision(digits)).toLocaleString('en-US', { maximumFractionDigits: 6 });
}

// A figure by its key: a year (release_year) is written as a year, never with a thousands separator.
export function fmtFigure(key, v) {
  return /(^|_)year$/.test(key) && Number.isInteger(v) ? String(v) : fmt(v);
}

const GiB = 1024 ** 3;
export function bytes(v) {
  if (typeof v !== 'number') return '–';
  if (Math.abs(v) >= GiB / 10) return `${fmt(v / GiB, 3)} GiB`;
  return `${fmt(v / 1024 ** 2, 3)} MiB`;
}

export function seconds(v) {
  if (typeof v !== 'number') return '–';
  if (v < 1) return `${fmt(v * 1000, 3)} ms`;
  if (v < 120) return `${fmt(v, 3)} s`;
  if (v < 7200) return `${fmt(v / 60, 3)} min`;
  if (v < 172800) return `${fmt(v / 3600, 3)} h`;
  return `${fmt(v / 86400, 3)} days`;
}

// The unit of a spec key from its name (the catalog's naming contract: units are in key names).
export function unitOf(key) {
  const units = [['_tflops_per_dollar_hour', 'TFLOPS per $/h'], ['_gb_per_dollar_hour', 'GB per $/h'],
    ['price_per_gpu_hour', '$ per GPU-hour'], ['_gbps_per_w', 'GB/s per W'], ['_tflops_per_w', 'TFLOPS per W'], ['_gb_per_w', 'GB per W'], ['_per_w', 'per W'],
    ['_flop_per_byte', 'FLOP/B'], ['_gbps', 'GB/s'], ['_tflops', 'TFLOPS'], ['_tops', 'TOPS'], ['_gb', 'GB'], ['_mib', 'MiB'],
    ['_w', 'W'], ['_mhz', 'MHz'], ['_mb', 'MB'], ['_bits', 'bit']];
  for (const [suffix, unit] of units) if (key.endsWith(suffix)) return unit;
  return '';
}

export function label(key) {
  return key.replace(/_sparse$/, ' (sparse)').replace(/_/g, ' ');
}

// Reads a user-chosen file as text (in the browser; nothing is uploaded until a request is made).
export function readFile(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(String(r.result));
    r.onerror = () => reject(r.error);
    r.readAsText(file);
  });
}

export function download(name, text, type = 'text/plain') {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = el('a', { href: url, download: name, class: 'visually-hidden', text: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// Fill patterns that tell series apart without colour (each also has its own shade and a label).
// Every chart gets its own pattern ids (a per-chart prefix): a url(#id) fill resolves to the first
// element with that id in the document, and a copy in a hidden panel draws nothing (issue #18).
export const PATTERNS = ['solid', 'hatch', 'dots', 'cross', 'vert', 'back', 'grid', 'dense'];
let chartsDrawn = 0;  // numbers each chart's pattern ids
// {defs, fill(i)}: the <defs> to put in one chart's SVG and the fill of its series i.
export function chartPatterns() {
  const prefix = `pat${++chartsDrawn}-`;
  const defs = svg('defs');
  const mk = (id, ...shapes) => defs.append(svg('pattern', { id: `${prefix}${id}`, width: 8, height: 8, patternUnits: 'userSpaceOnUse' },
    svg('rect', { width: 8, height: 8, class: `pat-bg pat-bg-${id}` }), ...shapes));
  mk('solid');
  mk('hatch', svg('path', { d: 'M-2,2 l4,-4 M0,8 l8,-8 M6,10 l4,-4', class: 'pat-fg' }));
  mk('dots', svg('circle', { cx: 4, cy: 4, r: 1.6, class: 'pat-fg pat-fill' }));
  mk('cross', svg('path', { d: 'M0,4 h8 M4,0 v8', class: 'pat-fg' }));
  mk('vert', svg('path', { d: 'M2,0 v8 M6,0 v8', class: 'pat-fg' }));
  mk('back', svg('path', { d: 'M-2,6 l4,4 M0,0 l8,8 M6,-2 l4,4', class: 'pat-fg' }));
  mk('grid', svg('path', { d: 'M0,0 h8 v8 M0,0 v8', class: 'pat-fg' }));
  mk('dense', svg('path', { d: 'M0,2 h8 M0,6 h8', class: 'pat-fg' }));
  return { defs, fill: (i) => `url(#${prefix}${PATTERNS[i % PATTERNS.length]})` };
}

// Chart geometry: a chart's viewBox is as wide as the room it is drawn in (at most `max` units), so its
// 12 px labels are 12 px on a phone too (issue #18: the fit chart's were ~5 px at 390 px, scaled down).
export const NARROW_CHART_PX = 560;  // below this width a chart puts its labels above its bars
const MIN_CHART_PX = 280;  // narrower than any phone the page supports (320 px less the page's padding)
export function chartWidth(max = 720) {
  const main = document.querySelector('main');
  let w = main ? main.clientWidth : window.innerWidth;
  if (main) {
    const cs = getComputedStyle(main);
    w -= parseFloat(cs.paddingLeft) + parseFloat(cs.paddingRight);
  }
  return Math.max(MIN_CHART_PX, Math.min(max, Math.floor(w)));
}

// The width of a text in the page's font (a canvas measures it; the chart is not in the document yet).
let measureCtx = null;
export function textWidth(text, px = 12, weight = 400) {
  if (!measureCtx) measureCtx = document.createElement('canvas').getContext('2d');
  measureCtx.font = `${weight} ${px}px ${getComputedStyle(document.documentElement).fontFamily}`;
  return measureCtx.measureText(String(text)).width;
}

// Lines of `text` each at most maxPx wide: broken at spaces, and inside a long word after '/', '-' or '_'.
export function wrapText(text, maxPx, px = 12, weight = 400) {
  const pieces = String(text).split(/(?<=\s)|(?<=[/_-])/);
  const lines = [];
  let line = '';
  for (const piece of pieces) {
    if (line && textWidth((line + piece).trimEnd(), px, weight) > maxPx) { lines.push(line.trimEnd()); line = piece.trimStart(); } else line += piece;
  }
  if (line.trim()) lines.push(line.trimEnd());
  return lines.length ? lines : [''];
}

// A horizontal bar chart: one group per metric, one bar per series, each bar labelled with its value.
// metrics: [{name, unit, values: [number|null per series]}], series: [names]. Narrow (a phone): the
// series' names go on their own line above their bars, and long metric names wrap.
export function barChart(title, metrics, series) {
  const width = chartWidth(720);
  const narrow = width < NARROW_CHART_PX;
  const barH = 18, gap = 6, groupGap = 22, lineH = 16;
  const valueW = Math.max(textWidth('not listed'), ...metrics.flatMap((m) => m.values.filter((v) => typeof v === 'number').map((v) => textWidth(fmt(v))))) + 12;
  const left = narrow ? 0 : 210, right = narrow ? valueW : Math.max(110, valueW);
  let y = 10;
  const body = [];
  const pat = chartPatterns();
  for (const m of metrics) {
    for (const line of wrapText(`${m.name}${m.unit ? ` (${m.unit})` : ''}`, width - 4, 13, 600)) {
      body.push(svg('text', { x: 0, y: y + 12, class: 'chart-metric', text: line }));
      y += 18;
    }
    const max = Math.max(...m.values.filter((v) => typeof v === 'number'), 0);
    m.values.forEach((v, i) => {
      if (narrow) {
        body.push(svg('text', { x: 0, y: y + 12, class: 'chart-label', text: series[i] }));
        y += lineH;
      } else {
        body.push(svg('text', { x: left - 8, y: y + barH - 5, class: 'chart-label', 'text-anchor': 'end', text: series[i] }));
      }
      const w = typeof v === 'number' && max > 0 ? Math.max(1, ((width - left - right) * v) / max) : 0;
      if (typeof v === 'number') {
        body.push(svg('rect', { x: left, y, width: w, height: barH, fill: pat.fill(i), class: `bar series-${i % PATTERNS.length}` },
          svg('title', { text: `${series[i]}: ${fmt(v)} ${m.unit || ''}` })));
        body.push(svg('text', { x: left + w + 6, y: y + barH - 5, class: 'chart-value', text: fmt(v) }));
      } else {
        body.push(svg('text', { x: left + 4, y: y + barH - 5, class: 'chart-value muted', text: 'not listed' }));
      }
      y += barH + gap;
    });
    y += groupGap - gap;
  }
  return svg('svg', { viewBox: `0 0 ${width} ${y}`, class: 'chart', role: 'img', 'aria-label': title },
    svg('title', { text: title }), pat.defs, ...body);
}

// A status line that screen readers announce.
export function liveStatus() {
  return el('p', { class: 'status', role: 'status', 'aria-live': 'polite' });
}

// A sortable table. columns: [{key, label, num, render(row)}]
export function sortableTable(columns, rows, { caption, sortKey, rowAttrs } = {}) {
  let key = sortKey || columns[0].key;
  let dir = 1;
  const table = el('table', { class: 'data sortable' });
  const render = (refocus = false) => {
    const col = columns.find((c) => c.key === key);
    const sorted = [...rows].sort((a, b) => {
      const va = a[key], vb = b[key];
      if (va === vb) return 0;
      if (va === null || va === undefined) return 1;
      if (vb === null || vb === undefined) return -1;
      if (col && col.num) return (va - vb) * dir;
      return String(va).localeCompare(String(vb)) * dir;
    });
    const head = el('tr', {}, columns.map((c) => el('th', {
      scope: 'col', class: c.num ? 'num' : '',
      'aria-sort': c.key === key ? (dir > 0 ? 'ascending' : 'descending') : 'none',
    }, c.sortable === false ? c.label : el('button', {
      type: 'button', class: 'sort', 'data-key': c.key,
      'aria-label': `Sort by ${c.label}`,
      onclick: () => { if (key === c.key) dir = -dir; else { key = c.key; dir = c.num ? -1 : 1; } render(true); },
    }, c.label, el('span', { class: 'sort-mark', 'aria-hidden': 'true', text: c.key === key ? (dir > 0 ? ' ▲' : ' ▼') : '' })))));
    clear(table,
      caption ? el('caption', { text: caption }) : null,
      el('thead', {}, head),
      el('tbody', {}, sorted.map((r) => el('tr', rowAttrs ? rowAttrs(r) : {}, columns.map((c) =>
        el(c.key === columns[0].key ? 'th' : 'td', { class: c.num ? 'num' : '', scope: c.key === columns[0].key ? 'row' : undefined },
          c.render ? c.render(r) : fmt(r[c.key])))))));
    labelCells(table);  // cards on a phone (style.css), the sort buttons kept above them
    if (refocus) {
      const again = table.querySelector(`button.sort[data-key="${key}"]`);
      if (again) again.focus();
    }
  };
  render();
  return table;
}

// The catalog's GPUs and MIG slices, fetched once for the pickers.
let gpuCache = null;
export async function gpuList() {
  if (!gpuCache) gpuCache = api('/gpus?include_mig=true');
  const r = await gpuCache;
  return r.ok ? r.data.gpus : [];
}

// A picker of several GPUs: a text field with suggestions, an Add button, and removable chips.
export function gpuPicker({ id, labelText, gpus, selected = [], onchange, includeSlices = true }) {
  const listId = `${id}-options`;
  const chosen = [...selected];
  const chips = el('ul', { class: 'chips', 'aria-label': `${labelText}: chosen` });
  const input = el('input', { id, list: listId, autocomplete: 'off', placeholder: 'type a GPU, e.g. h100' });
  const msg = el('span', { class: 'picker-msg', role: 'status', 'aria-live': 'polite' });
  const datalist = el('datalist', { id: listId }, gpus.filter((g) => includeSlices || !g.mig_profile).map((g) => el('option', { value: g.id, text: g.name })));
  const draw = () => clear(chips, chosen.map((gid) => el('li', { class: 'chip' }, el('span', { text: gid }),
    el('button', { type: 'button', class: 'chip-remove', 'aria-label': `Remove ${gid}`, text: '×',
      onclick: () => { chosen.splice(chosen.indexOf(gid), 1); draw(); onchange([...chosen]); } }))));
  // What the catalog says of a typed name (GET /gpus/{name}): an id the list holds is taken as is; any
  // other name is resolved by the server first, so an ambiguous or unknown one is refused here, beside
  // the input, with its candidates, and nothing chosen or shown is wiped (issue #18).
  const problem = el('div', { class: 'control-error', id: `${id}-error`, 'aria-live': 'assertive' });
  const choose = (gid) => {
    clear(problem);
    if (!chosen.includes(gid)) chosen.push(gid);
    input.value = '';
    msg.textContent = `Added ${gid}.`;
    draw();
    onchange([...chosen]);
  };
  let asked = 0;  // the latest lookup: an older answer arriving late is dropped
  const add = async () => {
    const v = input.value.trim();
    if (!v) return;
    const known = gpus.find((g) => g.id === v) || gpus.find((g) => g.name.toLowerCase() === v.toLowerCase());
    if (known) { choose(known.id); return; }
    const mine = ++asked;
    msg.textContent = `Looking up ${v}…`;
    const r = await api(`/gpus/${v.split('/').map(encodeURIComponent).join('/')}`);
    if (mine !== asked) return;
    msg.textContent = '';
    if (r.ok && r.data && r.data.id) { choose(r.data.id); return; }
    if (r.status === 0 || r.status >= 500 || !r.error) { choose(v); return; }  // no answer: the command says what is wrong
    // The candidates are the catalog's ids that the server's message names (it lists them in order).
    const named = r.error.code === 'ambiguous' ? gpus.filter((g) => new RegExp(`(^|[\\s:,])${g.id.replace(/[.+]/g, '\\$&')}([,;]|$)`).test(r.error.message)) : [];
    clear(problem, errorBox(r.error), named.length ? el('p', { class: 'candidates' }, 'Did you mean: ',
      named.map((g) => el('button', { type: 'button', class: 'candidate', title: g.name, text: g.id, onclick: () => choose(g.id) }))) : null);
  };
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); add(); } });
  input.addEventListener('change', () => { if (gpus.some((g) => g.id === input.value.trim())) add(); });
  draw();
  return {
    node: el('div', { class: 'picker' }, el('label', { for: id, text: labelText }), ' ', input, datalist, ' ',
      el('button', { type: 'button', text: 'Add', onclick: add, 'aria-label': `Add to ${labelText}` }), msg, problem, chips),
    set(list) { chosen.splice(0, chosen.length, ...list); draw(); },
    get: () => [...chosen],
  };
}

// The market's bearer token: kept in this tab's session storage only (never local storage, never a
// cookie), so closing the tab signs out and no other tab or site reads it.
const TOKEN_KEY = 'gpuplan.token';
export function token() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}
const tokenListeners = new Set();
export function setToken(t) {
  try {
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch { /* storage disabled: the token lives for this page only */ }
  for (const f of tokenListeners) f(t);
}
export function onToken(f) { tokenListeners.add(f); }

// A sign-in box: a password field for the token, Sign in and Sign out, and what the server said.
// `id` prefixes the element ids (one box per section); onchange runs after each sign-in or out.
export function signInBox(id, onchange) {
  const input = el('input', { id: `${id}-token`, type: 'password', autocomplete: 'off', spellcheck: 'false', placeholder: 'gpl_...' });
  const state = el('span', { class: 'signin-state', role: 'status', 'aria-live': 'polite' });
  const out = el('button', { type: 'button', id: `${id}-signout`, text: 'Sign out', onclick: () => { setToken(''); } });
  const err = errorSlot(`${id}-signin-error`);
  const draw = () => {
    const t = token();
    state.textContent = t ? `Signed in (token ${t.split('_').slice(0, 2).join('_')}…, kept in this tab only).` : 'Not signed in.';
    out.hidden = !t;
  };
  onToken(() => { draw(); onchange(); });
  draw();
  // The token is tried on the caller's own usage (every tenant may read it) before it is kept: a
  // mistyped one is refused here, beside the box, not later beside some other control.
  return el('form', { class: 'signin', 'aria-label': 'Sign in', onsubmit: async (e) => {
    e.preventDefault();
    const v = input.value.trim();
    if (!v) { err.show({ message: 'Paste an API token (gpl_...): `gpuplan tokens create` or make run prints one.', field: 'token' }); return; }
    const r = await api('/usage', undefined, { bearer: v });
    if (!r.ok) { err.show(r.error); return; }  // a wrong token, or a server without a market
    err.clear();
    input.value = '';
    setToken(v);
  } }, el('label', { for: `${id}-token`, text: 'API token ' }), input, ' ', el('button', { type: 'submit', text: 'Sign in' }), ' ', out, ' ', state, err.node);
}

// Money of the market: dollars with enough digits that a per-second charge moves visibly.
export function dollars(v, digits = 2) {
  return typeof v === 'number' && Number.isFinite(v) ? `$${v.toFixed(digits)}` : '–';
}

// A fresh idempotency key per click: a retried request never rents twice.
export function freshKey() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return `web-${[...b].map((x) => x.toString(16).padStart(2, '0')).join('')}`;
}

// An error slot beside a control: shows the API's error there and leaves everything else on the page.
export function errorSlot(id) {
  const node = el('div', { class: 'control-error', id, 'aria-live': 'assertive' });
  return { node, show: (e) => clear(node, errorBox(e)), clear: () => clear(node) };
}

// One GPU or slice from the catalog (GET /gpus/{id}: its MIG table), fetched once per id.
const detailCache = new Map();
export async function gpuDetail(id) {
  if (!detailCache.has(id)) detailCache.set(id, api(`/gpus/${encodeURIComponent(id)}`));
  const r = await detailCache.get(id);
  if (!r.ok && r.status === 0) detailCache.delete(id);  // no answer (network): ask again next time
  return r.ok ? r.data : null;
}

// Gives each cell of a table its column's header as data-label: on a phone the rows of a `stack`
// table become cards, each value after its label (style.css), so nothing scrolls sideways.
export function labelCells(table) {
  const heads = [...table.querySelectorAll('thead th')].map((h) => h.textContent.trim());
  for (const tr of table.querySelectorAll('tbody tr')) {
    [...tr.children].forEach((c, i) => { if (heads[i]) c.dataset.label = heads[i]; });
  }
  table.classList.add('stack');
  return table;
}
