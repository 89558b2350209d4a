// The page: tabs as buttons, hash routes (#/catalog, #/gpu/<id>, #/compare?gpu=a,b, #/fit, #/mig, #/plan,
// #/rent?model=...&rate=..., #/provider),
// each section rendered by its module the first time it is shown.
import { commands, el } from './ui.js';
import * as catalog from './catalog.js';
import * as compare from './compare.js';
import * as fit from './fit.js';
import * as mig from './mig.js';
import * as plan from './plan.js';
import * as rent from './rent.js';
import * as provider from './provider.js';

const sections = { catalog, compare, fit, mig, plan, rent, provider };
const started = new Set();

function parseHash() {
  const h = decodeURIComponent(location.hash.replace(/^#\/?/, ''));
  const [path, query = ''] = h.split('?');
  const params = new URLSearchParams(query);
  if (path.startsWith('gpu/')) return { section: 'catalog', gpu: path.slice(4), params };
  const section = sections[path] ? path : 'catalog';
  return { section, params };
}

async function show() {
  const route = parseHash();
  for (const name of Object.keys(sections)) {
    const tab = document.getElementById(`tab-${name}`);
    const panel = document.getElementById(`panel-${name}`);
    const on = name === route.section;
    tab.setAttribute('aria-selected', on ? 'true' : 'false');
    tab.tabIndex = on ? 0 : -1;
    panel.hidden = !on;
  }
  const panel = document.getElementById(`panel-${route.section}`);
  const mod = sections[route.section];
  if (!started.has(route.section)) {
    started.add(route.section);
    await mod.init(panel, route);
  }
  if (mod.route) await mod.route(panel, route);
  document.body.dataset.section = route.section;
}

function setupTabs() {
  const tabs = [...document.querySelectorAll('[role="tab"]')];
  tabs.forEach((tab, i) => {
    tab.addEventListener('click', () => {
      const target = `#/${tab.dataset.section}`;
      if (location.hash !== target) location.hash = target;
      else show();
    });
    tab.addEventListener('keydown', (e) => {
      let j = null;
      if (e.key === 'ArrowRight') j = (i + 1) % tabs.length;
      else if (e.key === 'ArrowLeft') j = (i - 1 + tabs.length) % tabs.length;
      else if (e.key === 'Home') j = 0;
      else if (e.key === 'End') j = tabs.length - 1;
      if (j === null) return;
      e.preventDefault();
      tabs[j].focus();
      tabs[j].click();
    });
  });
}

async function main() {
  setupTabs();
  window.addEventListener('hashchange', show);
  const have = await commands();
  const info = document.getElementById('build-info');
  if (info) info.append(el('span', { text: `Commands in this build: ${have.join(', ') || 'none (the server did not answer)'}.` }));
  await show();
  document.body.dataset.ready = 'true';
}

main();
