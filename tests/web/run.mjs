// Browser tests of gpuplan's page: start `gpuplan serve` on a free loopback port, drive Debian's
// chromium with playwright-core through each section as a user would, check what it shows, and keep
// screenshots. Usage: node run.mjs <path to gpuplan> <screenshot dir>
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

// Screenshots (CI artefacts): $GPUPLAN_SCREENSHOT_DIR, else the second argument, else build/screenshots.
const [binary, shotArg] = process.argv.slice(2);
const shotDir = process.env.GPUPLAN_SCREENSHOT_DIR || shotArg || 'build/screenshots';
if (!binary) {
  console.error('usage: node run.mjs <gpuplan binary> [screenshot dir]');
  process.exit(2);
}
mkdirSync(shotDir, { recursive: true });
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

function startServer(extra = []) {
  return new Promise((resolve, reject) => {
    const proc = spawn(binary, ['serve', '--host', '127.0.0.1', '--port', '0', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 10000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/http:\/\/127\.0\.0\.1:(\d+)\//);
      if (m) { clearTimeout(timer); resolve({ proc, base: m[0] }); }
    });
    proc.stderr.on('data', (d) => { out += d; });
    proc.on('exit', (code) => reject(new Error(`server exited with ${code}: ${out}`)));
  });
}

const { proc, base } = await startServer();

// A second server with a market (`gpuplan serve --data-dir`) holding the demo inventory that
// scripts/market-demo.sh (`make run`) creates, made here through the API: provider "demo-provider"
// (its offers are demo data), one 8-GPU A100-80GB NVLink node with dynamic MIG, one 2-GPU H100 PCIe
// node, and four offers.
async function startMarketServer() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gpuplan-market-web-'));
  const init = spawnSync(binary, ['admin', 'init', '--data-dir', dir, '--json'], { encoding: 'utf8' });
  if (init.status !== 0) throw new Error(`admin init failed: ${init.stderr}`);
  const admin = JSON.parse(init.stdout).token;
  const server = await startServer(['--data-dir', dir]);
  const call = async (method, route, token, body) => {
    const r = await fetch(`${server.base}api/v1${route}`, {
      method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
    const data = await r.json();
    if (r.status !== 201) throw new Error(`${method} ${route}: ${r.status} ${JSON.stringify(data)}`);
    return data;
  };
  const provider = await call('POST', '/tenants', admin, { name: 'demo-provider', kind: 'provider' });
  const ops = await call('POST', `/tenants/${provider.id}/users`, admin, { name: 'demo-ops', role: 'admin' });
  const { token } = await call('POST', '/tokens', admin, { user_id: ops.id });
  const gpus = (target, prefix, n, mig) => Array.from({ length: n }, (_, i) => ({ target, uuid: `${prefix}${i}`, mig }));
  await call('POST', '/nodes', token, { name: 'demo-a100-node', region: 'demo-eu', interconnect: 'nvlink', vcpus: 128, ram_gb: 1024, disk_gb: 8000,
    gpus: gpus('a100-80gb-sxm4', 'GPU-DEMO-A100-000', 8, 'dynamic') });
  await call('POST', '/nodes', token, { name: 'demo-h100-node', region: 'demo-eu', interconnect: 'pcie', vcpus: 64, ram_gb: 512, disk_gb: 4000,
    gpus: gpus('h100-80gb-pcie', 'GPU-DEMO-H100-000', 2, 'none') });
  const offers = {};
  for (const [target, price] of [['a100-80gb-sxm4/1g.10gb', 0.35], ['a100-80gb-sxm4/3g.40gb', 1.10], ['a100-80gb-sxm4', 1.90], ['h100-80gb-pcie', 2.49]]) {
    offers[target] = (await call('POST', '/offers', token, { target, region: 'demo-eu', price_per_hour: price })).id;
  }
  return { ...server, dir, offers };
}
const market = await startMarketServer();
const userDataDir = mkdtempSync(path.join(os.tmpdir(), 'gpuplan-chromium-'));  // a new profile every run
const browser = await chromium.launchPersistentContext(userDataDir, {
  executablePath: CHROMIUM,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-dev-shm-usage'],
  viewport: { width: 1280, height: 900 },
  acceptDownloads: true,
});
const health = await (await fetch(`${base}api/v1/health`)).json();
const have = (c) => health.commands.includes(c);
console.log(`server ${base}, commands: ${health.commands.join(', ')}`);

const problems = [];
function watch(page, name) {
  page.on('pageerror', (e) => problems.push(`${name}: page error: ${e.message}`));
  // A 404 or 409 (an unknown or ambiguous name looked up) is an answer the page shows, not a fault.
  page.on('console', (m) => { if (m.type() === 'error' && !/status of 40[49]/.test(m.text()) && !m.text().includes('404')) problems.push(`${name}: console: ${m.text()}`); });
  page.on('request', (r) => { if (!r.url().startsWith(base) && !r.url().startsWith(market.base) && !r.url().startsWith('data:') && !r.url().startsWith('blob:')) problems.push(`${name}: request to ${r.url()}`); });
}

function expect(cond, msg) { if (!cond) throw new Error(msg); }
async function open(page, hash, at = base) {
  await page.goto(`${at}${hash}`);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 10000 });
}
const shot = (page, name) => page.screenshot({ path: path.join(shotDir, `${name}.png`), fullPage: true });

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

test('catalog: table, search, sort, MIG slices', async (page) => {
  await open(page, '#/catalog');
  const rows = page.locator('#panel-catalog table.sortable tbody tr');
  await rows.first().waitFor();
  const all = await rows.count();
  expect(all >= 5, `expected GPUs in the table, got ${all}`);
  await page.fill('#cat-search', 'h100');
  const names = await rows.locator('th').allTextContents();
  expect(names.length >= 1 && names.every((n) => /h100/i.test(n)), `search h100 shows ${names}`);
  await page.fill('#cat-search', '');
  await page.click('button.sort[data-key="memory_gb"]');
  let mem = (await rows.locator('td:nth-child(4)').allTextContents()).map((t) => Number(t.replace(/,/g, '')));
  expect(mem.every((v, i) => i === 0 || mem[i - 1] >= v), `memory not sorted descending: ${mem}`);
  expect(await page.getAttribute('th:has(button.sort[data-key="memory_gb"])', 'aria-sort') === 'descending', 'aria-sort not set');
  await page.click('button.sort[data-key="memory_gb"]');
  mem = (await rows.locator('td:nth-child(4)').allTextContents()).map((t) => Number(t.replace(/,/g, '')));
  expect(mem.every((v, i) => i === 0 || mem[i - 1] <= v), `memory not sorted ascending: ${mem}`);
  await page.check('#cat-slices');
  expect(await rows.count() > all, 'MIG slices did not add rows');
  await page.uncheck('#cat-slices');
  await page.fill('#cat-minmem', '80');
  mem = (await rows.locator('td:nth-child(4)').allTextContents()).map((t) => Number(t.replace(/,/g, '')));
  expect(mem.length > 0 && mem.every((v) => v >= 80), `min memory filter: ${mem}`);
  await shot(page, 'catalog');
});

test('catalog: a GPU page with every figure, source, date and conflicts', async (page) => {
  const detail = await (await fetch(`${base}api/v1/gpus/a100-40gb-sxm4?explain=true`)).json();
  await open(page, '#/catalog');
  await page.click('#panel-catalog a[href="#/gpu/a100-40gb-sxm4"]');
  await page.waitForSelector('#panel-catalog .catalog-detail h2');
  expect((await page.textContent('.catalog-detail h2')) === detail.name, 'GPU page title');
  const figRows = page.locator('table.figures tbody tr');
  expect(await figRows.count() === Object.keys(detail.specs).length, 'one row per figure');
  const bw = page.locator('table.figures tr[data-key="memory_bandwidth_gbps"]');
  const bwText = await bw.textContent();
  expect(bwText.includes(detail.specs.memory_bandwidth_gbps.checked), 'checked date shown');
  expect(bwText.includes(detail.specs.memory_bandwidth_gbps.explain.slice(0, 30)), 'explanation shown');
  expect(await bw.locator('a').first().getAttribute('href') === detail.specs.memory_bandwidth_gbps.source.url, 'source link');
  const withConflict = Object.entries(detail.specs).find(([, f]) => f.conflicts.length > 0);
  if (withConflict) {
    const t = await page.locator(`table.figures tr[data-key="${withConflict[0]}"] td.conflicts`).textContent();
    expect(t.includes(withConflict[1].conflicts[0].value), `conflict ${withConflict[1].conflicts[0].value} shown`);
  }
  const derived = Object.entries(detail.specs).find(([, f]) => f.derived);
  if (derived) expect((await page.locator(`table.figures tr[data-key="${derived[0]}"]`).textContent()).includes('derived'), 'derivation shown');
  expect(await page.locator('.sources li').count() >= 1, 'sources listed');
  await shot(page, 'gpu-a100-40gb-sxm4');
  await page.click('a[href="#/gpu/a100-40gb-sxm4/3g.20gb"]');
  await page.waitForFunction(() => document.querySelector('.catalog-detail h2')?.textContent.includes('3g.20gb'));
  expect((await page.textContent('.catalog-detail')).includes('A MIG slice of'), 'MIG slice page');
  await shot(page, 'gpu-a100-40gb-sxm4-3g.20gb');
  // Issue #14: where the server answers `available_now`, the GPU page says what is free and from what
  // price, or "not available now" with when it last was (faked here: this server has no market).
  for (const [extra, want] of [[{ available_now: [{ region: 'demo-eu', count: 3, lowest_price_per_hour: 1.1 }] }, /demo-eu: 3 available from \$1\.10 per hour/],
    [{ available_now: [], last_available_at_ms: Date.UTC(2026, 0, 2, 3, 4) }, /Not available now \(last available 2026-01-02 03:04 UTC\)/]]) {
    await page.route('**/api/v1/gpus/a100-40gb-sxm4?explain=true', async (route) => {
      const r = await route.fetch();
      await route.fulfill({ response: r, body: JSON.stringify({ ...(await r.json()), ...extra }) });
    });
    await page.goto(`${base}#/gpu/a100-40gb-sxm4`);
    await page.reload();
    await page.waitForSelector('.catalog-detail .available-now');
    const said = await page.textContent('.catalog-detail .available-now');
    expect(want.test(said), `available now: ${said}`);
    await page.unroute('**/api/v1/gpus/a100-40gb-sxm4?explain=true');
  }
  await page.goto(`${base}#/gpu/a100-40gb-sxm4`);
  await page.reload();
  await page.waitForSelector('.catalog-detail h2');
  expect(await page.locator('.catalog-detail .available-now').count() === 0, 'nothing said where the server does not answer available_now');
  await page.goto(`${base}#/gpu/no-such-gpu-xyz`);
  await page.waitForSelector('.catalog-detail .notice.error');
  expect((await page.textContent('.catalog-detail .notice.error')).includes('no-such-gpu-xyz'), 'unknown GPU error');
});

test('compare: side by side with charts, add and remove', async (page) => {
  await open(page, '#/compare?gpu=a100-40gb-sxm4,a40');
  await page.waitForSelector('#panel-compare table.compare-table');
  expect(await page.locator('#panel-compare table.compare-table thead th').count() === 3, 'two targets and a label column');
  expect(await page.locator('#panel-compare svg.chart rect.bar').count() >= 4, 'bars drawn');
  expect((await page.textContent('#panel-compare table.compare-table')).includes('%'), 'difference in percent');
  await page.fill('#cmp-gpu', 'h100-80gb-sxm5');
  await page.press('#cmp-gpu', 'Enter');
  await page.waitForFunction(() => document.querySelectorAll('#panel-compare table.compare-table thead th').length === 4);
  expect(page.url().includes('h100-80gb-sxm5'), 'URL keeps the selection');
  if (have('offers.list')) {
    const priced = (await (await fetch(`${base}api/v1/offers?gpu=a40`)).json()).offers.length > 0;
    if (priced) expect((await page.locator('#panel-compare figcaption').allTextContents()).includes('Per dollar'), 'per-dollar chart from offers');
  }
  await shot(page, 'compare');
  // A MIG slice is a target like any other.
  await page.fill('#cmp-gpu', 'a100-40gb-sxm4/3g.20gb');
  await page.press('#cmp-gpu', 'Enter');
  await page.waitForFunction(() => document.querySelectorAll('#panel-compare table.compare-table thead th').length === 5);
  await page.click('button[aria-label="Remove a100-40gb-sxm4/3g.20gb"]');
  await page.waitForFunction(() => document.querySelectorAll('#panel-compare table.compare-table thead th').length === 4);
  await page.click('button[aria-label="Remove a40"]');
  await page.waitForFunction(() => document.querySelectorAll('#panel-compare table.compare-table thead th').length === 3);
  await page.fill('#cmp-gpu', 'no-such-gpu-xyz');
  await page.press('#cmp-gpu', 'Enter');
  await page.waitForSelector('#panel-compare .notice.error');
});

test('fit and speed', async (page) => {
  await open(page, '#/fit');
  if (!have('fit')) {
    await page.waitForSelector('#panel-fit .notice.unavailable');
    expect((await page.textContent('#panel-fit')).includes('not available in this build'), 'fit unavailable notice');
    await shot(page, 'fit-unavailable');
    return;
  }
  await page.waitForSelector('#panel-fit table.verdicts tbody tr', { timeout: 15000 });
  // "Rent this" carries the model and weights to the Rent tab.
  const rentHref = await page.getAttribute('#fit-rent-this', 'href');
  expect(rentHref.startsWith('#/rent?') && rentHref.includes(`model=${await page.inputValue('#fit-model')}`) && rentHref.includes('weights='), `fit's Rent this link: ${rentHref}`);
  expect(await page.locator('#panel-fit svg.memory-chart line.capacity').count() >= 1, 'capacity lines');
  const before = await page.textContent('#panel-fit table.verdicts');
  await page.fill('#fit-batch', '64');
  await page.waitForFunction((b) => document.querySelector('#panel-fit table.verdicts')?.textContent !== b, before, { timeout: 10000 });
  expect(/fits|does not fit/.test(await page.textContent('#panel-fit table.verdicts')), 'verdicts');
  if (have('perf')) {
    await page.waitForFunction(() => document.querySelector('#panel-fit table.verdicts thead')?.textContent.includes('Time to first token'), null, { timeout: 10000 });
  }
  await shot(page, 'fit');
  // Training changes the columns: no KV cache, step time and MFU instead of latency.
  await page.selectOption('#fit-task', 'lora');
  await page.fill('#fit-batch', '1');
  await page.waitForFunction(() => document.querySelector('#panel-fit table.breakdown')?.textContent.includes('Adapters') ||
    document.querySelector('#panel-fit table.breakdown')?.textContent.includes('Gradients'), null, { timeout: 10000 });
  await shot(page, 'fit-lora');
  // QLoRA picks a quantized base by itself instead of failing on the default bf16.
  await page.selectOption('#fit-task', 'qlora');
  expect(await page.inputValue('#fit-weights') === 'nf4-dq', 'qlora switches to nf4-dq');
  await page.waitForFunction(() => document.querySelector('#panel-fit table.breakdown')?.textContent.includes('nf4-dq'), null, { timeout: 10000 });
  await page.selectOption('#fit-task', 'lora');
  expect(await page.inputValue('#fit-weights') === 'bf16', 'lora returns to bf16');
  // Engine and tensor parallelism reach the request: vLLM over tp 2 shows its KV pool settings.
  await page.selectOption('#fit-task', 'infer');
  await page.selectOption('#fit-engine', 'vllm');
  await page.fill('#fit-tp', '2');
  await page.waitForFunction(() => document.querySelector('#panel-fit')?.textContent.includes('tp 2'), null, { timeout: 10000 });
  await page.fill('#fit-tp', '1');
  await page.selectOption('#fit-engine', 'transformers');
  // fp8 weights in transformers cannot run on an A100 (no fp8 tensor cores, no fallback kernel): the row
  // says why instead of a verdict on memory, and has no speed.
  await page.fill('#fit-weights', 'fp8');
  await page.waitForFunction(() => document.querySelector('#panel-fit table.verdicts')?.textContent.includes('cannot run'), null, { timeout: 10000 });
  const refusedRow = page.locator('#panel-fit table.verdicts tr[data-target="a100-80gb-sxm4"]');
  expect((await refusedRow.locator('.reason[data-refusal="weights_hardware"]').textContent()).includes('fp8 tensor cores'), 'refusal reason shown');
  await shot(page, 'fit-refused');
  await page.fill('#fit-weights', 'bf16');
  // An uploaded config.json (read in the browser, sent inline).
  const tiny = { architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: 2048, intermediate_size: 5632,
    num_attention_heads: 32, num_hidden_layers: 22, num_key_value_heads: 4, vocab_size: 32000, max_position_embeddings: 2048,
    rms_norm_eps: 1e-5, tie_word_embeddings: false, torch_dtype: 'bfloat16' };
  await page.setInputFiles('#fit-config', { name: 'tinyllama.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(tiny)) });
  await page.waitForFunction(() => document.querySelector('#panel-fit .model-line')?.textContent.includes('tinyllama'), null, { timeout: 10000 });
  await shot(page, 'fit-upload');
  await page.setInputFiles('#fit-config', { name: 'config.json', mimeType: 'application/json', buffer: Buffer.from('{not json') });
  await page.waitForSelector('#panel-fit .notice.error');
});

test('MIG: build a layout by clicking, see validity and reason', async (page) => {
  await open(page, '#/mig?gpu=a100-40gb-sxm4');
  await page.waitForSelector('#panel-mig .mig-grid');
  expect(await page.locator('#panel-mig .slot').count() === 8, 'A100 has 8 memory slices');
  await page.click('#panel-mig button.profile[data-profile="3g.20gb"]');
  expect(await page.getAttribute('#panel-mig button.profile[data-profile="3g.20gb"]', 'aria-pressed') === 'true', 'profile pressed');
  await page.click('#panel-mig .slot[data-slot="4"]');
  expect((await page.inputValue('#mig-layout')) === '3g.20gb@4', 'layout text follows the clicks');
  if (!have('mig.check')) {
    expect((await page.textContent('#panel-mig')).includes('not available in this build'), 'mig.check unavailable notice');
    await shot(page, 'mig-unavailable');
    return;
  }
  await page.waitForSelector('#panel-mig .mig-verdict .valid');
  await page.click('#panel-mig .slot[data-slot="5"]');
  await page.waitForSelector('#panel-mig .mig-verdict .invalid');
  expect((await page.textContent('#panel-mig .mig-verdict')).length > 12, 'a reason is given');
  // The refused click is not kept: the diagram keeps the accepted 3g.20gb@4, the reason beside the input.
  expect(await page.locator('#panel-mig button.instance').count() === 1, 'the refused instance is not drawn');
  expect((await page.textContent('#mig-layout-error')).includes('3g.20gb@5'), 'the reason names the refused instance');
  await shot(page, 'mig-invalid');
  await page.click('#panel-mig .slot[data-slot="0"]');
  await page.waitForSelector('#panel-mig .mig-verdict .valid');
  expect(await page.locator('#panel-mig button.instance').count() === 2, 'two instances placed');
  await page.click('#panel-mig button.instance >> nth=1');
  await page.waitForFunction(() => document.querySelectorAll('#panel-mig button.instance').length === 1);
  await page.waitForSelector('#panel-mig .mig-verdict .valid');
  await shot(page, 'mig');
  // A typed layout with compute instances goes to mig.check as typed (the page has no grammar of its
  // own: it once sent `3g.20gb@NaN,...`), and the diagram is redrawn from the entries it answers.
  const sent = [];
  const onRequest = (q) => { if (q.url().includes('/api/v1/mig/check')) sent.push(q.postData() || ''); };
  page.on('request', onRequest);
  const typed = '3g.20gb@0[1c,2c],1g.5gb@4';
  await page.fill('#mig-layout', typed);
  await page.click('#panel-mig button:has-text("Check")');
  await page.waitForFunction(() => document.querySelectorAll('#panel-mig button.instance').length === 2
    && document.querySelector('#panel-mig .mig-verdict .valid'), null, { timeout: 10000 });
  page.off('request', onRequest);
  expect(sent.length > 0 && sent.every((b) => !b.includes('NaN')), `mig.check got the layout as typed: ${sent.join(' | ')}`);
  expect(sent.some((b) => JSON.parse(b).layout === typed), `the typed text was sent: ${sent.join(' | ')}`);
  expect((await page.inputValue('#mig-layout')) === typed, `layout text kept: ${await page.inputValue('#mig-layout')}`);
  const names = await page.locator('#panel-mig button.instance').evaluateAll((bs) => bs.map((b) => b.getAttribute('aria-label')));
  expect(names[0].includes('3g.20gb at slot 0') && names[1].includes('1g.5gb at slot 4'), `instances from the entries: ${names}`);
  expect((await page.textContent('#panel-mig .mig-verdict')).includes('nvidia-smi mig'), 'commands for the compute instances');
  await shot(page, 'mig-typed');
  if (have('mig.pack')) {
    const fleet = 'nodes:\n  - name: node-1\n    gpus:\n      - {target: a100-40gb-sxm4, count: 2}\n';
    const reqs = 'requests:\n  - {name: chat, tenant: acme, count: 3, profile: 3g.20gb}\n';
    await page.click('#panel-mig .pack-files summary');  // the files are the second way in, below the editor
    await page.setInputFiles('#pack-fleet', { name: 'fleet.yaml', mimeType: 'text/yaml', buffer: Buffer.from(fleet) });
    await page.setInputFiles('#pack-requests', { name: 'requests.yaml', mimeType: 'text/yaml', buffer: Buffer.from(reqs) });
    await page.click('#panel-mig .pack-form button[type="submit"]');
    await page.waitForSelector('#panel-mig .pack-summary', { timeout: 10000 });
    const summary = await page.textContent('#panel-mig .pack-summary');
    expect(summary.includes('GPUs used') && summary.includes('moves 0 running instances'), 'pack summary');
    expect((await page.textContent('#panel-mig .pack-changes caption')).includes('Changes on 2 GPUs'), 'changes per GPU');
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#panel-mig button.download')]);
    expect(dl.suggestedFilename() === 'mig-parted-config.yaml', 'download name');
    await shot(page, 'mig-pack');
  }
});

test('plan: offers and the recommended plan', async (page) => {
  await open(page, '#/plan');
  if (have('offers.list')) {
    await page.waitForSelector('#panel-plan .offers table tbody tr');
    await page.selectOption('#offers-gpu', 'a40');
    await page.waitForFunction(() => [...document.querySelectorAll('#panel-plan .offers tbody tr')].every((r) => r.textContent.includes('a40')));
  } else {
    await page.waitForSelector('#panel-plan .offers .notice.unavailable');
  }
  if (!have('plan')) {
    expect((await page.textContent('#panel-plan')).includes('not available in this build'), 'plan unavailable notice');
    await shot(page, 'plan-unavailable');
    return;
  }
  await page.click('#panel-plan form.workload button[type="submit"]');
  await page.waitForSelector('#panel-plan .plan-results table.plans', { timeout: 20000 });
  expect(await page.locator('#panel-plan .plan-results table.plans tbody tr').count() >= 1, 'plans listed');
  expect((await page.textContent('#panel-plan .recommended')).includes('Why:'), 'the recommended plan with its reason');
  expect(await page.locator('#panel-plan svg.chart .pt').count() >= 1, 'cost against time points');
  const planRent = new URLSearchParams((await page.getAttribute('#plan-rent-this', 'href')).split('?')[1]);
  expect(planRent.get('model') === await page.inputValue('#plan-model') && planRent.get('rate') === await page.inputValue('#plan-rate'), `plan's Rent this link: ${planRent}`);
  await shot(page, 'plan');
  // Training: a deadline, and the chart is cost against time to finish.
  await page.selectOption('#plan-goal', 'train');
  await page.fill('#plan-train', '1e9');
  await page.click('#panel-plan form.workload button[type="submit"]');
  await page.waitForFunction(() => document.querySelector('#panel-plan figcaption')?.textContent.includes('time to finish'), null, { timeout: 30000 });
  await shot(page, 'plan-train');
  // An uploaded offers file replaces the shipped snapshot.
  await page.selectOption('#plan-goal', 'serve');
  const csv = 'provider,region,offer,gpu,gpus,interconnect,vcpus,ram_gb,price_hour,spot_price_hour,currency,available,captured_at,source\n' +
    `testcloud,lab-1,box-h100,h100-80gb-sxm5,1,pcie,8,64,2.5,,USD,yes,${new Date().toISOString().slice(0, 10)},https://example.com/prices\n`;
  await page.setInputFiles('#plan-offers', { name: 'mine.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
  await page.waitForFunction(() => document.querySelector('#plan-status')?.textContent.includes('mine.csv'));
  await page.click('#panel-plan form.workload button[type="submit"]');
  await page.waitForFunction(() => document.querySelector('#panel-plan .plan-results')?.textContent.includes('testcloud'), null, { timeout: 20000 });
});

// Issue #18: the plan's start-up (provisioning + weights load) and billing (step, minimum, billed time) are in
// the Plan tab's table and in its cards at phone width, and in the recommendation; a proxy offer is marked.
test('plan: start-up and billing in the table and the 390 px cards; a proxy is marked', async (page) => {
  if (!have('plan')) return;
  for (const width of [1400, 390]) {
    await page.setViewportSize({ width, height: width > 600 ? 900 : 844 });
    await open(page, '#/plan');
    await page.waitForSelector('#panel-plan form.workload');
    // Results of an earlier answer (the other width, or a test before) are replaced when this one arrives:
    // wait for the old table to go, so the cells read below are the new answer's, not ones being removed.
    const previous = await page.$('#panel-plan .plan-results table.plans');
    await page.click('#panel-plan form.workload button[type="submit"]');
    if (previous) await previous.waitForElementState('hidden', { timeout: 20000 });
    await page.waitForSelector('#panel-plan .plan-results table.plans tbody tr', { timeout: 20000 });
    const heads = await page.locator('#panel-plan table.plans thead th').allTextContents();
    expect(heads.includes('Time, start-up, billing'), `${width} px: the plans table has the start-up and billing: ${heads}`);
    const row = page.locator('#panel-plan table.plans tbody tr').first();
    const startup = row.locator('td.time .startup'), billing = row.locator('td.time .billing');
    expect(/^start-up .* \(.* \+ .* load\)$/.test(await startup.textContent()), `${width} px: start-up: ${await startup.textContent()}`);
    expect(/^billed per (second|minute|hour), (min |no min)/.test(await billing.textContent()), `${width} px: billing: ${await billing.textContent()}`);
    for (const cell of [startup, billing]) {
      const box = await cell.boundingBox();
      expect(box && box.width > 0 && box.x >= 0 && box.x + box.width <= width + 1, `${width} px: the cell is on screen: ${JSON.stringify(box)}`);
    }
    if (width < 600) {  // a card: each value under its label
      expect(await row.locator('td.time').getAttribute('data-label') === 'Time, start-up, billing', 'the cards label start-up and billing');
    }
    const rec = page.locator('#panel-plan .recommended');
    expect(/Start-up: .*provisioning/.test(await rec.locator('li.plan-startup').textContent()), `${width} px: the recommendation's start-up`);
    expect(/Billing: per-/.test(await rec.locator('li.plan-billing').textContent()), `${width} px: the recommendation's billing`);
    await shot(page, `plan-startup-billing-${width}`);
  }
  // A training job has an end: each instance's billed time is shown.
  await page.selectOption('#plan-goal', 'train');
  await page.fill('#plan-train', '1e8');
  await page.click('#panel-plan form.workload button[type="submit"]');
  await page.waitForFunction(() => /billed .* per instance/.test(document.querySelector('#panel-plan table.plans tbody td.time .billing')?.textContent || ''), null, { timeout: 30000 });
  // The 3g.20gb row is a proxy (a share of another GPU): marked in the table and the recommendation.
  await page.selectOption('#plan-goal', 'serve');
  await page.fill('#plan-rate', '1');
  await page.fill('#plan-opt-gpu', 'a100-40gb-sxm4/3g.20gb');
  await page.click('#panel-plan form.workload button[type="submit"]');
  await page.waitForSelector('#panel-plan table.plans tbody .proxy-badge', { timeout: 20000 });
  expect(/Proxy: .*share/.test(await page.textContent('#panel-plan .recommended')), 'the recommendation says it is a proxy and why');
  await page.setViewportSize({ width: 1280, height: 900 });
});

test('every section says so when its command is missing', async (page) => {
  await page.route('**/api/v1/health', (route) => route.fulfill({ status: 200, contentType: 'application/json',
    body: JSON.stringify({ status: 'ok', commands: ['catalog.list', 'catalog.show'] }) }));
  await page.route('**/api/v1/compare', (route) => route.fulfill({ status: 404, contentType: 'application/json',
    body: JSON.stringify({ error: { code: 'unknown_command', message: "'compare' is not available in this build", field: 'command' } }) }));
  for (const [section, sel] of [['fit', '#panel-fit'], ['mig', '#panel-mig'], ['plan', '#panel-plan'], ['compare', '#panel-compare'], ['rent', '#panel-rent']]) {
    await open(page, `#/${section}`);
    await page.waitForSelector(`${sel} .notice.unavailable`);
    expect((await page.textContent(sel)).includes('not available in this build'), `${section} notice`);
  }
  await shot(page, 'unavailable-compare');
});

test('keyboard: tabs with arrows, focus visible, sort by keyboard', async (page) => {
  await open(page, '#/catalog');
  // Waits for a tab to be selected; on failure says where the focus and the selection were.
  const selected = async (id, step) => {
    try {
      await page.waitForFunction((t) => document.querySelector(t).getAttribute('aria-selected') === 'true', id, { timeout: 10000 });
    } catch (e) {
      const state = await page.evaluate(() => ({
        focus: document.activeElement ? document.activeElement.id || document.activeElement.tagName : null,
        selected: [...document.querySelectorAll('[role="tab"][aria-selected="true"]')].map((t) => t.id),
        hash: location.hash,
      }));
      throw new Error(`${step}: ${id} not selected; ${JSON.stringify(state)}`);
    }
  };
  await page.focus('#tab-catalog');
  await page.keyboard.press('ArrowRight');
  await selected('#tab-compare', 'ArrowRight');
  expect(await page.evaluate(() => document.activeElement.id) === 'tab-compare', 'focus moves with the tab');
  expect(await page.isHidden('#panel-catalog'), 'other panels hidden');
  await page.keyboard.press('End');
  await selected('#tab-provider', 'End');
  await page.keyboard.press('Home');
  await selected('#tab-catalog', 'Home');
  await page.focus('button.sort[data-key="tdp_w"]');
  await page.keyboard.press('Enter');
  expect(await page.evaluate(() => document.activeElement.dataset.key) === 'tdp_w', 'focus stays on the sort button');
  const outline = await page.evaluate(() => getComputedStyle(document.activeElement, ':focus-visible').outlineStyle);
  expect(outline !== 'none', 'a focus outline');
});

test('market: the offers view lists live market rows beside the files and marks demo data', async (page) => {
  await open(page, '#/plan', market.base);
  const box = page.locator('#panel-plan section.offers');
  await box.locator('table tbody tr').first().waitFor();
  // The demo inventory's 1g.10gb offer: a live row with its count (8 A100-80GB x 7 slices) and the mark.
  const slice = box.locator(`tbody tr.offer-market:has(td:text-is("${market.offers['a100-80gb-sxm4/1g.10gb']}"))`);
  await slice.waitFor();
  const text = await slice.textContent();
  expect(text.includes('live') && text.includes('56 available'), `the 1g.10gb row shows live and its count: ${text}`);
  expect(await slice.locator('.demo-badge').isVisible(), 'the demo row carries a visible "demo data" badge');
  expect((await slice.locator('.demo-badge').textContent()).trim() === 'demo data', 'the badge says demo data');
  expect(await page.isVisible('#offers-demo-note'), 'a note says the demo rows are demo data');
  expect(/demo data/.test(await page.textContent('#offers-demo-note')), 'the note names demo data');
  expect(await box.locator('tbody tr.offer-file').count() > 0, 'file offers are listed beside the market rows');
  const status = await box.locator('p.status').textContent();
  expect(/4 live from the market/.test(status), `the status counts the live rows: ${status}`);
  await shot(page, 'market-offers-demo');
  // The plan over the same server considers the market's rows: they carry their marks there too.
  await page.fill('#plan-rate', '0.5');
  await page.fill('#plan-top', '50');  // every plan: the demo offers rank 11th and later here
  await page.click('#panel-plan form.workload button[type="submit"]');
  await page.waitForSelector('#panel-plan .plan-results table.plans', { timeout: 20000 });
  const marked = await page.locator('#panel-plan .plan-results table.plans tbody tr:has(.demo-badge)').count();
  expect(marked >= 1, `market plans carry the demo data mark (${marked} rows)`);
  await shot(page, 'market-plan-demo');
  // The same view on a server without a store: no live rows, no demo note.
  await open(page, '#/plan');
  await page.locator('#panel-plan section.offers table tbody tr').first().waitFor();
  expect(await page.locator('#panel-plan section.offers tbody tr.offer-market').count() === 0, 'no market rows without a store');
  expect(!(await page.isVisible('#offers-demo-note')), 'no demo note without a store');
});

// The phone-width check (390 px) is the layout test at the end: every element inside the window, no
// sideways-scrolling box counted as fitting, chart labels whole, apart and readable.

// Issue #18's page bugs, each reproduced here first.
test('charts: the Fit chart keeps its patterns after Compare (pattern ids unique per chart)', async (page) => {
  if (!have('fit')) return;
  await open(page, '#/compare?gpu=a100-40gb-sxm4,a40');
  await page.waitForSelector('#panel-compare svg.chart rect.bar');
  await page.click('#tab-fit');
  await page.waitForSelector('#panel-fit svg.memory-chart rect.comp', { timeout: 15000 });
  // Each bar's fill names a pattern that document.getElementById finds inside the bar's own SVG (the first
  // element with an id wins: a copy in a hidden panel drew the visible bars blank).
  const unresolved = (sel) => page.evaluate((q) => [...document.querySelectorAll(q)].map((r) => {
    const m = /^url\(#([^)]+)\)$/.exec(r.getAttribute('fill') || '');
    const target = m && document.getElementById(m[1]);
    return !m ? `no pattern fill: ${r.getAttribute('fill')}` : !target ? `${m[1]} not found`
      : target.closest('svg') !== r.closest('svg') ? `${m[1]} resolves to another chart's pattern` : null;
  }).filter(Boolean), sel);
  let bad = await unresolved('#panel-fit svg.memory-chart rect.comp');
  expect(bad.length === 0, `fit chart bars: ${[...new Set(bad)].join('; ')}`);
  // And back: Compare's bars after Fit drew its own chart (and a new comparison after that).
  await page.click('#tab-compare');
  await page.waitForSelector('#panel-compare svg.chart rect.bar');
  bad = await unresolved('#panel-compare svg.chart rect.bar');
  expect(bad.length === 0, `compare bars after Fit: ${[...new Set(bad)].join('; ')}`);
  await page.click('button[aria-label="Remove a40"]');
  await page.waitForFunction(() => document.querySelectorAll('#panel-compare table.compare-table thead th').length === 2);
  await page.click('#tab-fit');
  await page.waitForSelector('#panel-fit svg.memory-chart rect.comp');
  bad = await unresolved('#panel-fit svg.memory-chart rect.comp');
  expect(bad.length === 0, `fit chart bars after a new comparison: ${[...new Set(bad)].join('; ')}`);
  const ids = await page.evaluate(() => [...document.querySelectorAll('svg pattern[id]')].map((p) => p.id));
  expect(new Set(ids).size === ids.length, `pattern ids repeated across charts: ${ids.length} ids, ${new Set(ids).size} distinct`);
});

test('pickers: an ambiguous name shows its candidates beside the input and keeps the results', async (page) => {
  await open(page, '#/compare?gpu=a100-40gb-sxm4,a40');
  const heads = () => page.locator('#panel-compare table.compare-table thead th').count();
  await page.waitForSelector('#panel-compare table.compare-table');
  for (const [name, some] of [['a100', 'a100-40gb-pcie'], ['A100 80GB', 'a100-80gb-pcie']]) {
    await page.fill('#cmp-gpu', name);
    await page.press('#cmp-gpu', 'Enter');
    await page.waitForSelector('#panel-compare .picker .notice.error', { timeout: 10000 });
    const said = await page.textContent('#panel-compare .picker');
    expect(!said.includes('Added'), `"${name}" is not added: ${said}`);
    expect(said.includes(name), `the message names what was typed: ${said}`);
    const candidates = await page.locator('#panel-compare .picker button.candidate').allTextContents();
    expect(candidates.includes(some) && candidates.includes('a100-80gb-sxm4'), `"${name}" lists its candidates: ${candidates}`);
    expect(await heads() === 3, 'the comparison shown is kept');
    expect(await page.locator('#panel-compare .compare-results svg.chart rect.bar').count() >= 4, 'the charts are kept');
    expect(await page.inputValue('#cmp-gpu') === name, 'the typed name stays in the input to correct');
  }
  await page.click('#panel-compare .picker button.candidate:text-is("a100-80gb-sxm4")');
  await page.waitForFunction(() => document.querySelectorAll('#panel-compare table.compare-table thead th').length === 4);
  expect(await page.locator('#panel-compare .picker .notice.error').count() === 0, 'the message goes once a candidate is chosen');
  // A name the catalog knows by another spelling is added under its id.
  await page.fill('#cmp-gpu', 'H100 SXM');
  await page.press('#cmp-gpu', 'Enter');
  await page.waitForFunction(() => document.querySelectorAll('#panel-compare table.compare-table thead th').length === 5);
  expect((await page.locator('#panel-compare .chips li span').allTextContents()).includes('h100-80gb-sxm5'), 'added by its id');
  // An unknown name is refused beside the input too, the results kept.
  await page.fill('#cmp-gpu', 'no-such-gpu-xyz');
  await page.press('#cmp-gpu', 'Enter');
  await page.waitForSelector('#panel-compare .picker .notice.error');
  expect(await heads() === 5, 'an unknown name wipes nothing');
});

test('MIG: an overlapping or over-budget layout is refused beside the input with the server\'s reason', async (page) => {
  if (!have('mig.check')) return;
  await open(page, '#/mig?gpu=a100-80gb-sxm4');
  await page.waitForSelector('#panel-mig .mig-grid');
  await page.fill('#mig-layout', '3g.40gb@0');
  await page.click('#panel-mig button:has-text("Check")');
  await page.waitForSelector('#panel-mig .mig-verdict .valid');
  for (const bad of ['4g.40gb@0,4g.40gb@4', '3g.40gb@0,3g.40gb@2', '7g.80gb@0,1g.10gb@0']) {
    const answer = await (await fetch(`${base}api/v1/mig/check`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ gpu: 'a100-80gb-sxm4', layout: bad }) })).json();
    expect(answer.valid === false, `the server refuses ${bad}`);
    await page.fill('#mig-layout', bad);
    await page.click('#panel-mig button:has-text("Check")');
    await page.waitForFunction((r) => document.querySelector('#mig-layout-error')?.textContent.includes(r), answer.reason, { timeout: 10000 })
      .catch(() => {});
    const beside = await page.textContent('#mig-layout-error');
    expect(beside.includes(answer.reason), `${bad}: the server's reason beside the input: ${beside}`);
    const used = /Compute slices used: (\d+) of (\d+)/.exec(await page.textContent('#panel-mig .compute-label'));
    expect(used && Number(used[1]) <= Number(used[2]), `${bad}: the diagram never uses more than the GPU has: ${used && used[0]}`);
    const drawn = await page.locator('#panel-mig button.instance').evaluateAll((bs) => bs.map((b) => b.getAttribute('aria-label')));
    expect(drawn.length === 1 && drawn[0].includes('3g.40gb at slot 0'), `${bad}: the diagram keeps the layout accepted before: ${drawn}`);
    expect(await page.inputValue('#mig-layout') === bad, `${bad}: the refused text stays in the input to correct`);
  }
  await shot(page, 'mig-refused');
  await page.fill('#mig-layout', '3g.40gb@0,3g.40gb@4');
  await page.click('#panel-mig button:has-text("Check")');
  await page.waitForSelector('#panel-mig .mig-verdict .valid');
  expect((await page.textContent('#mig-layout-error')) === '', 'the reason goes once the layout is accepted');
  expect(await page.locator('#panel-mig button.instance').count() === 2, 'the accepted layout is drawn');
});

test('figures: years as years, no serving "Total" repeating the hourly price, the plan form before the offers', async (page) => {
  await open(page, '#/compare?gpu=a100-40gb-sxm4,a40');
  await page.waitForSelector('#panel-compare table.compare-table');
  const year = (await page.locator('#panel-compare table.compare-table tr:has(th:text-is("release year")) td').allTextContents()).map((t) => t.trim());
  expect(year.length === 2 && year.every((y) => /^\d{4}\b/.test(y)), `release years written as years: ${year}`);
  if (!have('plan')) return;
  await open(page, '#/plan');
  await page.waitForSelector('#panel-plan form.workload');
  await page.waitForSelector('#panel-plan section.offers', { state: 'attached' });
  const order = await page.evaluate(() => {
    const form = document.querySelector('#panel-plan form.workload');
    const offers = document.querySelector('#panel-plan section.offers');
    return form && offers ? form.compareDocumentPosition(offers) & Node.DOCUMENT_POSITION_FOLLOWING : -1;
  });
  expect(order > 0, 'the plan form comes before the offers table');
  await page.click('#panel-plan form.workload button[type="submit"]');
  await page.waitForSelector('#panel-plan .plan-results table.plans', { timeout: 20000 });
  const headsServe = await page.locator('#panel-plan table.plans thead th').allTextContents();
  expect(!headsServe.includes('Total'), `a serving plan has no Total column (it repeated the hourly price): ${headsServe}`);
  expect(/no total/i.test(await page.textContent('#panel-plan table.plans caption')), 'the caption says why there is no total');
  expect(!(await page.textContent('#panel-plan .recommended')).includes('in total'), 'the recommended serving plan states no total');
  await page.selectOption('#plan-goal', 'train');
  await page.fill('#plan-train', '1e9');
  await page.click('#panel-plan form.workload button[type="submit"]');
  await page.waitForFunction(() => document.querySelector('#panel-plan figcaption')?.textContent.includes('time to finish'), null, { timeout: 30000 });
  expect((await page.locator('#panel-plan table.plans thead th').allTextContents()).includes('Total'), 'a training plan keeps its Total');
});

// Issue #18, the Plan tab: the Pareto line over the chart's own axes, labels that do not collide, the
// per-target cost charts, and the form's inputs generated from the declared plan options.
test('plan: the Pareto front is exactly the non-dominated plans, labelled apart; cost per token per target', async (page) => {
  if (!have('plan')) return;
  await open(page, '#/plan');
  await page.fill('#plan-top', '40');
  await page.click('#panel-plan form.workload button[type="submit"]');
  await page.waitForSelector('#panel-plan svg.cost-time .pt', { timeout: 20000 });
  const chart = await page.evaluate(() => {
    const s = document.querySelector('#panel-plan svg.cost-time');
    const pts = [...s.querySelectorAll('.pt')].map((n) => ({ x: Number(n.dataset.x), y: Number(n.dataset.y), meets: n.classList.contains('meet'), front: n.dataset.front === 'true',
      cx: n.tagName === 'circle' ? Number(n.getAttribute('cx')) : Number(n.getAttribute('x')) + 4, cy: n.tagName === 'circle' ? Number(n.getAttribute('cy')) : Number(n.getAttribute('y')) + 4 }));
    const line = s.querySelector('polyline.pareto');
    const boxes = (q) => [...s.querySelectorAll(q)].map((n) => n.getBoundingClientRect()).map((r) => ({ l: r.left, r: r.right, t: r.top, b: r.bottom }));
    return { pts, line: line ? line.getAttribute('points').trim().split(/\s+/).map((xy) => xy.split(',').map(Number)) : [], labels: boxes('.pt-label'), markers: boxes('.pt'),
      caption: s.closest('figure').querySelector('figcaption').textContent };
  });
  expect(chart.pts.length >= 3, `several plans drawn: ${chart.pts.length}`);
  const pool = chart.pts.some((q) => q.meets) ? chart.pts.filter((q) => q.meets) : chart.pts;
  const dominated = (q) => pool.some((o) => o !== q && o.x <= q.x && o.y <= q.y && (o.x < q.x || o.y < q.y));
  const want = pool.filter((q) => !dominated(q));
  const marked = chart.pts.filter((q) => q.front);
  expect(marked.length === want.length && want.every((q) => q.front), `front marks ${marked.length} plans, the non-dominated are ${want.length}`);
  if (want.length > 1) {
    expect(chart.line.length === want.length, `the Pareto line has ${chart.line.length} vertices for ${want.length} front plans`);
    const sorted = [...want].sort((a, b) => a.x - b.x || a.y - b.y);
    expect(sorted.every((q, i) => Math.abs(q.cx - chart.line[i][0]) < 0.01 && Math.abs(q.cy - chart.line[i][1]) < 0.01), 'the line goes through the front\'s points in order of time');
  }
  expect(chart.labels.length >= 1, 'front plans are labelled');
  const hit = (a, c) => Math.min(a.r, c.r) - Math.max(a.l, c.l) > 1 && Math.min(a.b, c.b) - Math.max(a.t, c.t) > 1;
  const clashes = chart.labels.flatMap((a, i) => [...chart.labels.slice(i + 1), ...chart.markers].filter((c) => hit(a, c)));
  expect(clashes.length === 0, `${clashes.length} labels overlap a label or a marker`);
  expect(new RegExp(`${chart.labels.length} of ${want.length} labelled`).test(chart.caption), `the caption counts the labels: ${chart.caption}`);
  // Per target: the cheapest plan's $ per million tokens and tokens/s per dollar, with its offer named.
  const plans = (await (await fetch(`${base}api/v1/plan`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: await page.inputValue('#plan-model'), rate: 5, input_tokens: 1024, output_tokens: 256, top: 40, engine: await page.inputValue('#plan-engine') }) })).json()).plans;
  const targets = [...new Set(plans.filter((p) => p.meets_goal !== false).map((p) => p.target))];
  const per = page.locator('#panel-plan figure.per-target');
  expect(await per.locator('rect.bar').count() >= targets.length, `a bar per target and figure (${targets.length} targets)`);
  const behind = await per.locator('.offers-behind').textContent();
  expect(targets.every((t) => behind.includes(`${t}: `)), `the offer behind each target's bar is named: ${behind}`);
  await shot(page, 'plan-pareto');
});

test('plan: engine, training tasks and every other plan key come from the declared options', async (page) => {
  if (!have('plan')) return;
  const vocab = await (await fetch(`${base}api/v1/vocabulary`)).json();
  await open(page, '#/plan');
  await page.waitForSelector('#panel-plan form.workload');
  const engines = await page.locator('#plan-engine option').evaluateAll((os) => os.map((o) => o.value));
  const declared = vocab.options.find((o) => o.name === 'engine' && o.commands.includes('plan'));
  expect(JSON.stringify(engines) === JSON.stringify(vocab.vocabularies.engine), `engines from the vocabulary: ${engines}`);
  expect(await page.inputValue('#plan-engine') === declared.default, `the page's default engine is the CLI's (${declared.default})`);
  // Every plan key that is not asked above is a generated field, with the declared type.
  const asked = new Set(['model', 'config', 'weights', 'task', 'engine', 'rate', 'input_tokens', 'output_tokens', 'ttft_slo', 'tpot_slo', 'train_tokens',
    'deadline', 'budget', 'objective', 'spot', 'top', 'offers', 'market']);
  const keys = vocab.options.filter((o) => o.commands.includes('plan') && !asked.has(o.name) && !['object', 'files'].includes(o.type));
  expect(keys.length >= 20, `plan keys declared: ${keys.length}`);
  const missing = [];
  for (const o of keys) if (await page.locator(`#panel-plan form.workload [data-option="${o.name}"]`).count() !== 1) missing.push(o.name);
  expect(missing.length === 0, `plan keys without a field: ${missing.join(', ')}`);
  for (const k of ['gpu', 'provider', 'region', 'context', 'max_age', 'max_gpus', 'max_instances']) expect(await page.isVisible(`[data-option="${k}"]`), `${k} is in view`);
  expect(await page.getAttribute('#plan-opt-max_instances', 'max') === String(vocab.options.find((o) => o.name === 'max_instances').range.max), 'the declared range');
  // What is set reaches the request, typed; the status says which engine planned.
  const other = vocab.vocabularies.engine.find((e) => e !== declared.default && e !== 'auto');
  const bodies = [];
  page.on('request', (q) => { if (q.url().endsWith('/api/v1/plan')) bodies.push(JSON.parse(q.postData() || '{}')); });
  await page.selectOption('#plan-engine', other);
  await page.fill('#plan-opt-max_instances', '2');
  await page.fill('#plan-opt-provider', 'lambda, runpod');
  await page.click('#panel-plan form.workload button[type="submit"]');
  await page.waitForFunction((e) => document.querySelector('#plan-status')?.textContent.includes(`engine ${e}`), other, { timeout: 20000 });
  const b = bodies.at(-1);
  expect(b.engine === other && b.max_instances === 2 && JSON.stringify(b.provider) === '["lambda","runpod"]', `the request: ${JSON.stringify(b)}`);
  // The training goals are the library's training tasks; each brings its default weights.
  const trainings = vocab.tasks.filter((t) => t.training);
  const goals = await page.locator('#plan-goal option').evaluateAll((os) => os.map((o) => o.value));
  expect(trainings.every((t) => goals.includes(t.name)), `training tasks offered: ${goals}`);
  const quantized = trainings.find((t) => t.weights !== vocab.tasks.find((x) => !x.training).weights);
  if (quantized) {
    await page.selectOption('#plan-goal', quantized.name);
    expect(await page.inputValue('#plan-weights') === quantized.weights, `${quantized.name} brings ${quantized.weights}`);
    await page.fill('#plan-train', '1e8');
    await page.click('#panel-plan form.workload button[type="submit"]');
    await page.waitForFunction((t) => document.querySelector('#plan-status')?.textContent.includes(`task ${t}`), quantized.name, { timeout: 30000 });
    expect(bodies.at(-1).task === quantized.name && bodies.at(-1).weights === quantized.weights, `the training request: ${JSON.stringify(bodies.at(-1))}`);
  }
});

test('prices: an old list price is used with its date and a "may be stale" warning, in the offers and the plan', async (page) => {
  if (!have('plan') || !have('offers.list')) return;
  // The shipped snapshot: an offer older than the max age is listed with its warning.
  const listed = (await (await fetch(`${base}api/v1/offers`)).json()).offers.filter((o) => o.price_warning);
  await open(page, '#/plan');
  await page.waitForSelector('#panel-plan .offers table tbody tr');
  if (listed.length) {
    const row = page.locator(`#panel-plan .offers tbody tr:has(th:text-is("${listed[0].provider}"))`, { hasText: listed[0].name }).first();
    expect((await row.textContent()).includes(listed[0].price_warning), `the offers table shows "${listed[0].price_warning}"`);
  }
  const csv = 'provider,region,offer,gpu,gpus,interconnect,vcpus,ram_gb,price_hour,spot_price_hour,currency,available,captured_at,source\n' +
    'oldcloud,lab-1,box-a100,a100-80gb-sxm4,1,pcie,8,64,2.5,,USD,yes,2024-06-15,https://example.com/prices\n';
  await page.setInputFiles('#plan-offers', { name: 'old.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
  await page.waitForFunction(() => document.querySelector('#plan-status')?.textContent.includes('old.csv'));
  await page.click('#panel-plan form.workload button[type="submit"]');
  await page.waitForSelector('#panel-plan .plan-results table.plans', { timeout: 20000 });
  const rec = await page.textContent('#panel-plan .recommended');
  expect(/list price from 2024-06, may be stale \(\d+ days old\)/.test(rec), `the recommended plan warns: ${rec}`);
  expect(/may be stale/.test(await page.textContent('#panel-plan table.plans tbody th')), 'the plan row warns');
});

test('MIG: "use the whole GPU" grows three services\' instances into what is free and says what is left and why', async (page) => {
  if (!have('mig.check')) return;
  const gpu = 'a100-80gb-sxm4';
  const table = (await (await fetch(`${base}api/v1/gpus/${gpu}`)).json()).mig;
  const size = (name) => table.profiles.find((p) => p.name === name);
  const check = async (layout) => (await (await fetch(`${base}api/v1/mig/check`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ gpu, layout }) })).json());
  await open(page, `#/mig?gpu=${gpu}`);
  await page.waitForSelector('#panel-mig .mig-grid');
  const before = '1g.10gb@0,2g.20gb@2,1g.10gb@6';
  await page.fill('#mig-layout', before);
  await page.click('#panel-mig button:has-text("Check")');
  await page.waitForSelector('#panel-mig .mig-verdict .valid');
  await page.click('#mig-whole-gpu');
  await page.waitForSelector('#mig-whole .whole-answer', { timeout: 20000 });
  await page.waitForSelector('#panel-mig .mig-verdict .valid');
  const after = (await page.inputValue('#mig-layout')).split(',');
  expect(after.length === 3, `still three services: ${after}`);
  const said = await page.textContent('#mig-whole');
  const parsed = after.map((x) => { const [profile, start] = x.split('@'); return { profile, start: Number(start) }; });
  before.split(',').forEach((x, i) => {
    const [p0, s0] = x.split('@');
    expect(parsed[i].start === Number(s0) && size(parsed[i].profile).memory_slices >= size(p0).memory_slices && size(parsed[i].profile).compute_slices >= size(p0).compute_slices,
      `${x} grew in place: ${after[i]}`);
  });
  expect(after.join(',') !== before, `some instance grew: ${after}`);
  // No instance can grow further: every larger profile at its start is refused by mig.check.
  for (let i = 0; i < parsed.length; ++i) {
    const q = size(parsed[i].profile);
    for (const p of table.profiles.filter((x) => x.memory_slices >= q.memory_slices && x.compute_slices >= q.compute_slices && (x.memory_slices > q.memory_slices || x.compute_slices > q.compute_slices)
      && x.placements.some((pl) => pl.start === parsed[i].start))) {
      const trial = after.map((x, j) => (j === i ? `${p.name}@${parsed[i].start}` : x)).join(',');
      expect(!(await check(trial)).valid, `${trial} is valid: the page stopped growing too early`);
    }
  }
  const usedMem = parsed.reduce((a, x) => a + size(x.profile).memory_slices, 0), usedCompute = parsed.reduce((a, x) => a + size(x.profile).compute_slices, 0);
  expect(said.includes(`${table.memory_slices - usedMem} memory and ${table.compute_slices - usedCompute} compute slices are left free`), `what is left: ${said}`);
  expect(/stays: no larger profile starts at memory slice 2/.test(said), `why 2g.20gb@2 stays: ${said}`);
  await shot(page, 'mig-whole-gpu');
  // With nothing placed, the whole GPU is its largest instance.
  await page.click('#panel-mig button:has-text("Clear")');
  await page.click('#mig-whole-gpu');
  await page.waitForFunction(() => document.querySelector('#mig-whole')?.textContent.includes('takes all'), null, { timeout: 10000 });
  const largest = [...table.profiles].sort((a, b) => b.compute_slices - a.compute_slices || b.memory_slices - a.memory_slices)[0].name;
  expect(await page.inputValue('#mig-layout') === `${largest}@0`, `the whole GPU is ${largest}@0`);
});

// Issue #18: the MIG tab's inline editor. It opens filled in (a fleet of GPU models x counts, services by
// profile or memory x count) with its packing shown; editing a service's count and then a fleet count
// changes the answer (through POST /mig/pack with inline objects), at 1400 and 390 px without anything
// wider than the window.
test('MIG: the inline fleet and requests editor packs its example and follows each edit, at 1400 and 390 px', async (page) => {
  if (!have('mig.pack')) return;
  const sent = [];
  page.on('request', (q) => { if (q.url().includes('/api/v1/mig/pack')) sent.push(q.postData() || ''); });
  for (const width of [1400, 390]) {
    await page.setViewportSize({ width, height: width > 600 ? 900 : 844 });
    await page.goto('about:blank');  // a fresh page each width: the same hash again would not reload it
    await open(page, '#/mig?gpu=a100-40gb-sxm4');
    await page.waitForSelector('#pack-editor .fleet-row');
    await page.waitForSelector('#pack-results .pack-summary', { timeout: 15000 });
    const fleet = await page.locator('#pack-fleet-rows .fleet-row select').evaluateAll((ss) => ss.map((s) => s.value));
    expect(fleet.join(',') === 'a100-40gb-sxm4,a100-80gb-sxm4', `the example fleet: ${fleet}`);
    expect(await page.locator('#pack-request-rows .request-row').count() === 3, 'three example services');
    const chatProfile = await page.locator('#pack-request-rows .request-row').first().locator('input.request-value').inputValue();
    expect(chatProfile === '3g.20gb', `chat asks for half an A100-40GB, read from the catalog: ${chatProfile}`);
    const first = await page.textContent('#pack-results');
    expect(first.includes("2 GPUs used"), `the example packs on 2 GPUs: ${first.slice(0, 120)} (sent ${sent.at(-1)})`);
    expect(!first.includes('Not placed'), `the example places everything: ${first}`);
    expect(sent.some((b) => b.includes('"fleet":{"nodes"') && b.includes('"profile":"3g.20gb"') && b.includes('"memory_gb":8') && b.includes('"memory_gb":30')), `inline objects sent: ${sent.at(-1)}`);
    // Six chat instances of 3g.20gb: only the two A100-40GB have that profile (two each), so two stay out.
    const chatCount = page.locator('#pack-request-rows .request-row').first().locator('input.request-count');
    await chatCount.fill('6');
    await page.waitForFunction(() => document.querySelector('#pack-results')?.textContent.includes('Not placed'), null, { timeout: 15000 });
    const over = await page.textContent('#pack-results');
    expect(/chat × 2/.test(over), `two chat instances unplaced: ${over}`);
    for (const c of await layoutProblems(page)) throw new Error(`${width} px after an edit: ${c}`);
    await shot(page, `mig-editor-${width}`);
    // A third A100-40GB holds them all.
    await page.locator('#pack-fleet-rows .fleet-row').first().locator('input[type="number"]').fill('3');
    await page.waitForFunction(() => { const t = document.querySelector('#pack-results')?.textContent || ''; return t.includes('GPUs used') && !t.includes('Not placed'); }, null, { timeout: 15000 });
    const placed = await page.locator('#pack-results .pack-table tbody tr').count();
    expect(placed >= 3, `the fleet edit places everything on ${placed} GPUs`);
    // A count that is not a whole number is refused beside the rows, before any request.
    const n = sent.length;
    await chatCount.fill('0');
    await page.waitForFunction(() => document.querySelector('#pack-edit-error')?.textContent.includes('whole number'), null, { timeout: 5000 });
    await page.waitForTimeout(500);
    expect(sent.length === n, 'no pack request for a count of 0');
    for (const c of await layoutProblems(page)) throw new Error(`${width} px: ${c}`);
  }
});

// What does not fit the window, or cannot be read, on the page shown: the page scrolling sideways; any
// visible element running past the window's edges (a table or chart that needs a sideways-scrolling box
// does not count as fitting; the outermost such element is named); and in every chart a label that is
// cut at its SVG's edge, overlaps another label, or is drawn smaller than MIN_LABEL_PX.
const MIN_LABEL_PX = 9;  // rendered font size below which a chart label is unreadable (the fit chart's were ~5 px at 390)
async function layoutProblems(page) {
  return page.evaluate((minPx) => {
    const out = [];
    const W = window.innerWidth;
    const visible = (n) => n.getClientRects().length > 0 && getComputedStyle(n).visibility !== 'hidden';
    const name = (n) => `${n.tagName.toLowerCase()}${n.id ? `#${n.id}` : ''}${typeof n.className === 'string' && n.className ? `.${n.className.trim().split(/\s+/).join('.')}` : ''}`;
    if (document.scrollingElement.scrollWidth > W + 1) out.push(`the page scrolls sideways (${document.scrollingElement.scrollWidth} px wide)`);
    const wide = new Set();
    for (const n of document.querySelectorAll('header *, main *')) {
      if (n.closest('.visually-hidden, .skip, datalist, option, title, defs') || (n.closest('svg') && n.tagName.toLowerCase() !== 'svg')) continue;
      if (!visible(n)) continue;
      const r = n.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) continue;
      // Content overflowing its box (a long unbreakable word) counts where it runs past the window.
      const spill = getComputedStyle(n).overflowX === 'visible' && n.clientWidth > 0 ? Math.max(0, n.scrollWidth - n.clientWidth) : 0;
      if (r.right + spill <= W + 1 && r.left >= -1) continue;
      wide.add(n);
      if (n.parentElement && wide.has(n.parentElement)) continue;  // its parent is named already
      if (out.length < 40) out.push(`${name(n)} "${(n.textContent || '').trim().slice(0, 30)}" spans ${Math.round(r.left)}..${Math.round(r.right + spill)} px of ${W}`);
    }
    for (const s of document.querySelectorAll('main svg')) {
      if (!visible(s) || s.closest('button')) continue;
      const b = s.getBoundingClientRect();
      const vb = s.viewBox && s.viewBox.baseVal && s.viewBox.baseVal.width ? s.viewBox.baseVal.width : b.width;
      const scale = b.width / vb;
      const boxes = [];
      for (const t of s.querySelectorAll('text')) {
        const r = t.getBoundingClientRect();
        const text = t.textContent.trim();
        if (r.width === 0 || !text) continue;
        const where = `"${text}" in ${s.getAttribute('class') || 'svg'}`;
        const slack = 0.5;  // sub-pixel rounding of text boxes
        if (r.left < b.left - slack || r.right > b.right + slack || r.top < b.top - slack || r.bottom > b.bottom + slack) {
          out.push(`${where} cut at the chart's edge (${Math.round(r.left - b.left)}..${Math.round(r.right - b.left)} of ${Math.round(b.width)} px wide, ${Math.round(r.top - b.top)}..${Math.round(r.bottom - b.top)} of ${Math.round(b.height)} high)`);
        }
        const px = parseFloat(getComputedStyle(t).fontSize) * scale;
        if (px < minPx - 0.05) out.push(`${where} drawn at ${px.toFixed(1)} px (under ${minPx})`);
        boxes.push({ r, where });
      }
      // Overlap: two labels' boxes sharing more than OVERLAP_PX in both directions (glyph boxes of
      // neighbouring lines touch by a pixel or so without any ink overlapping).
      const OVERLAP_PX = 1.5;
      for (let i = 0; i < boxes.length; ++i) {
        for (let j = i + 1; j < boxes.length; ++j) {
          const a = boxes[i].r, c = boxes[j].r;
          const ox = Math.min(a.right, c.right) - Math.max(a.left, c.left), oy = Math.min(a.bottom, c.bottom) - Math.max(a.top, c.top);
          if (ox > OVERLAP_PX && oy > OVERLAP_PX && out.length < 80) out.push(`${boxes[i].where} overlaps ${boxes[j].where}`);
        }
      }
    }
    for (const th of document.querySelectorAll('[role="tabpanel"] table th')) {
      if (!visible(th)) continue;
      const wrap = th.closest('.table-wrap') || th.closest('table').parentElement;
      const w = wrap.getBoundingClientRect(), r = th.getBoundingClientRect();
      if (r.right > w.right + 0.5 || r.left < w.left - 0.5) out.push(`header "${th.textContent.trim()}" cut by its table's box (${Math.round(r.left - w.left)}..${Math.round(r.right - w.left)} of ${Math.round(w.width)} px)`);
    }
    return out;
  }, MIN_LABEL_PX);
}

// Every tab, in the states a user meets first, at one window width; look(where) checks and keeps a
// screenshot of each (issue #18: each tab at 1400 and 390 px, saved as CI artefacts).
async function tour(page, width, look) {
  await page.setViewportSize({ width, height: width > 600 ? 900 : 844 });
  await open(page, '#/catalog');
  await page.locator('#panel-catalog table.sortable tbody tr').first().waitFor();
  await look('catalog');
  await open(page, '#/gpu/a100-40gb-sxm4');
  await page.waitForSelector('.catalog-detail h2');
  await look('gpu-page');
  await open(page, '#/gpu/a100-80gb-sxm4/3g.40gb');
  await page.waitForSelector('.catalog-detail h2');
  await look('mig-slice-page');
  await open(page, '#/compare?gpu=a100-40gb-sxm4,a40,a100-80gb-sxm4/3g.40gb,h100-80gb-sxm5');
  await page.waitForSelector('#panel-compare svg.chart rect.bar');
  await look('compare');
  if (have('fit')) {
    await open(page, '#/fit?gpu=a100-80gb-sxm4/3g.40gb,a100-80gb-sxm4/1g.10gb,a100-40gb-sxm4,h100-80gb-sxm5');
    await page.waitForSelector('#panel-fit svg.memory-chart rect.comp', { timeout: 15000 });
    await page.waitForSelector('#panel-fit table.verdicts tbody tr');
    await look('fit');
  }
  if (have('mig.check')) {
    await open(page, '#/mig?gpu=a100-80gb-sxm4');
    await page.waitForSelector('#panel-mig .mig-grid');
    await page.fill('#mig-layout', '3g.40gb@0,2g.20gb@4,1g.10gb@6');
    await page.click('#panel-mig button:has-text("Check")');
    await page.waitForSelector('#panel-mig .mig-verdict .valid');
    await look('mig');
  }
  if (have('plan')) {
    await open(page, '#/plan');
    await page.click('#panel-plan form.workload button[type="submit"]');
    await page.waitForSelector('#panel-plan svg.chart .pt', { timeout: 20000 });
    await page.waitForSelector('#panel-plan .offers table tbody tr', { timeout: 10000 }).catch(() => {});
    await look('plan-serving');
    await page.selectOption('#plan-goal', 'train');
    await page.fill('#plan-train', '1e9');
    await page.click('#panel-plan form.workload button[type="submit"]');
    await page.waitForFunction(() => document.querySelector('#panel-plan figcaption')?.textContent.includes('time to finish'), null, { timeout: 30000 });
    await look('plan-training');
  }
  for (const tab of ['rent', 'provider']) {  // not signed in (web/market.mjs tours them signed in)
    await open(page, `#/${tab}`, market.base);
    await page.waitForTimeout(500);
    await look(tab);
  }
}

for (const width of [1400, 390]) {
  test(`layout: every tab at ${width} px fits the window, chart labels whole, apart and readable`, async (page) => {
    const found = [];
    await tour(page, width, async (where) => {
      await page.waitForTimeout(200);
      for (const c of await layoutProblems(page)) found.push(`${where}: ${c}`);
      await shot(page, `tab-${where}-${width}`);
      const saved = statSync(path.join(shotDir, `tab-${where}-${width}.png`), { throwIfNoEntry: false });
      if (!saved || saved.size === 0) found.push(`${where}: no screenshot saved in ${shotDir}`);
    });
    expect(found.length === 0, `${found.length} layout problems at ${width} px:\n${found.join('\n')}`);
  });
}

let failed = 0;
let ran = 0;
const started = Date.now();
// WEB_ONLY=<regex> runs the tests whose names match (while working on one).
const only = process.env.WEB_ONLY ? new RegExp(process.env.WEB_ONLY) : null;
for (const t of tests) {
  if (only && !only.test(t.name)) continue;
  ++ran;
  const page = await browser.newPage();
  watch(page, t.name);
  const before = problems.length;
  try {
    await t.fn(page);
    if (problems.length > before) throw new Error(problems.slice(before).join('\n'));
    console.log(`ok   ${t.name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${t.name}\n     ${e.message.split('\n').join('\n     ')}`);
    await page.screenshot({ path: path.join(shotDir, `FAILED-${t.name.replace(/[^a-z0-9]+/gi, '-')}.png`), fullPage: true }).catch(() => {});
  }
  await page.close();
}
await browser.close();
proc.kill('SIGTERM');
market.proc.kill('SIGTERM');
rmSync(userDataDir, { recursive: true, force: true });
rmSync(market.dir, { recursive: true, force: true });
console.log(`${ran - failed} of ${ran} browser tests passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${shotDir}`);
process.exit(failed ? 1 : 0);
