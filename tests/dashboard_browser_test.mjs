// The web dashboard in a real browser: Debian's chromium, headless and kept
// off the network, driven by playwright-core, against a daemon on a
// simulated fleet of 8 GPUs. Jobs and pipelines are submitted through the
// CLI, as a person would. Screenshots go to $GPUHERD_TEST_OUTPUT_DIR.
//
// Environment: GPUHERD_BIN (the binary), GPUHERD_DASHBOARD_NODE (a folder
// whose node_modules has playwright-core), GPUHERD_TEST_OUTPUT_DIR,
// CHROMIUM (default /usr/bin/chromium).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

const GPUHERD = process.env.GPUHERD_BIN;
const NODE_DIR = process.env.GPUHERD_DASHBOARD_NODE;
const OUT = process.env.GPUHERD_TEST_OUTPUT_DIR || path.join(os.tmpdir(), 'gpuherd-dashboard-test');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
assert.ok(GPUHERD, 'set GPUHERD_BIN to the gpuherd binary');
assert.ok(NODE_DIR, 'set GPUHERD_DASHBOARD_NODE to the folder where npm installed playwright-core');
assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing: install Debian's chromium (scripts/setup.sh does)`);
const { chromium } = createRequire(path.join(NODE_DIR, 'package.json'))('playwright-core');

const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuherd-dashboard-'));
let daemon;
let browser;
let port;
const offLoopback = [];
const pageErrors = [];

function cli(...args) {
  return execFileSync(GPUHERD, ['--home', home, ...args], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
}

function show(id) { return JSON.parse(cli('show', String(id), '--json')); }

async function waitFor(what, check, ms = 15000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function newPage(url) {
  const context = await browser.newContext({ viewport: { width: 1500, height: 1000 }, acceptDownloads: true });
  const page = await context.newPage();
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (!['127.0.0.1', ''].includes(u.hostname) && !u.protocol.startsWith('blob') && !u.protocol.startsWith('data')) {
      offLoopback.push(r.url());
    }
  });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  await page.goto(url);
  return page;
}

before(async () => {
  fs.mkdirSync(OUT, { recursive: true });
  daemon = spawn(GPUHERD, ['--home', home, 'daemon', '--sim', '8', '--port', '0', '--interval', '500ms'],
    { stdio: ['ignore', fs.openSync(path.join(home, 'daemon.out'), 'w'), 'inherit'] });
  await waitFor('the daemon', () => {
    try { cli('status'); return true; } catch (e) { return false; }
  });
  port = Number(fs.readFileSync(path.join(home, 'api-port'), 'utf8'));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Everything but loopback goes to a proxy that does not exist, and no
    // host name resolves: the page can reach the daemon and nothing else.
    args: ['--no-sandbox', '--disable-gpu', '--proxy-server=http://127.0.0.1:9', '--proxy-bypass-list=127.0.0.1',
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-default-apps', '--disable-domain-reliability'],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (daemon) {
    try { cli('stop'); } catch (e) { daemon.kill('SIGTERM'); }
    await new Promise((r) => { if (daemon.exitCode !== null) r(); else daemon.on('exit', r); });
  }
  fs.rmSync(home, { recursive: true, force: true });
});

test('read-only page shows the simulated fleet of 8 GPUs with live charts', async () => {
  const url = cli('dashboard', '--read-only').trim();
  assert.equal(url, `http://127.0.0.1:${port}/`);
  const page = await newPage(url);
  await page.locator('[data-testid=gpu-card]').nth(7).waitFor();
  assert.equal(await page.locator('[data-testid=gpu-card]').count(), 8);
  assert.match(await page.locator('[data-testid=sim-banner]').innerText(), /SIMULATED FLEET/);
  assert.equal(await page.locator('[data-testid=auth-state]').innerText(), 'read-only');
  // Two charts per card, drawn by uPlot, which fill as readings arrive.
  assert.equal(await page.locator('[data-testid=gpu-card] .uplot').count(), 16);
  await waitFor('readings in every chart', async () => page.evaluate(() =>
    [...document.querySelectorAll('[data-testid=gpu-chart]')].every((c) => Number(c.dataset.points) >= 2)));
  const first = page.locator('[data-testid=gpu-card]').first();
  await waitFor('a utilization reading', async () => /\d+ %/.test(await first.locator('[data-testid=gpu-util]').innerText()));
  assert.match(await first.locator('[data-testid=gpu-temp]').innerText(), /\d+ °C/);
  assert.match(await first.locator('[data-testid=gpu-pcie]').innerText(), /Gen\d x\d+/);
  assert.match(await first.locator('[data-testid=gpu-health]').innerText(), /not screened/);
  // Actions are disabled without the token.
  assert.equal(await first.locator('[data-testid=gpu-drain]').isDisabled(), true);
  await page.context().close();
});

test('a job submitted through the CLI appears; cancel needs the token in the UI and the API', async () => {
  // Every GPU of the simulated fleet (H100s and RTX 3090s): allowed to mix models.
  const mixed = path.join(home, 'mixed-models.json');
  fs.writeFileSync(mixed, JSON.stringify({ mixed_models: true }));
  const blocker = cli('submit', '-f', mixed, '--gpus', '8', '--name', 'dash-blocker', '--', 'sleep', '60').trim();
  const waiting = cli('submit', '--gpus', '1', '--name', 'dash-waiting', '--', 'sleep', '60').trim();
  const page = await newPage(`http://127.0.0.1:${port}/#/queue`);
  const row = page.locator(`[data-testid=job-row][data-job="${waiting}"]`);
  await row.waitFor();
  assert.equal(await row.getAttribute('data-state'), 'pending');
  assert.notEqual((await row.locator('[data-testid=job-reason]').innerText()).trim(), '');
  await page.locator(`[data-testid=job-row][data-job="${blocker}"][data-state=running]`).waitFor();
  assert.equal(await row.locator('[data-testid=job-cancel]').isDisabled(), true);

  // The API refuses the browser's request without the token.
  const status = await page.evaluate(async (id) => (await fetch(`/v1/jobs/${id}/cancel`, { method: 'POST' })).status, waiting);
  assert.equal(status, 401);
  // A wrong token: the button is enabled, the daemon refuses, the page says so.
  await page.locator('[data-testid=token-input]').fill('not-the-token');
  await page.locator('[data-testid=token-save]').click();
  await row.locator('[data-testid=job-cancel]:not([disabled])').click();
  await waitFor('the refusal', async () => /refused.*token/.test(await page.locator('[data-testid=notice]').innerText()));
  assert.equal(show(waiting).state, 'pending');
  await page.locator('[data-testid=token-forget]').click();
  await page.context().close();

  // The address `gpuherd dashboard` prints carries the token; the page keeps
  // it and takes it out of the address bar.
  const url = cli('dashboard').trim();
  assert.match(url, /#token=[0-9a-f]{64}$/);
  const admin = await newPage(url);
  await admin.locator('[data-testid=gpu-card]').nth(7).waitFor();
  assert.doesNotMatch(admin.url(), /token/);
  assert.match(await admin.locator('[data-testid=auth-state]').innerText(), /actions enabled/);
  // The blocker's job is on every card.
  await waitFor('jobs on the cards', async () =>
    (await admin.locator(`[data-testid=gpu-job]`).count()) === 8);
  await admin.screenshot({ path: path.join(OUT, 'dashboard-fleet.png'), fullPage: true });
  console.log(`screenshot: ${path.join(OUT, 'dashboard-fleet.png')}`);

  await admin.goto(`http://127.0.0.1:${port}/#/queue`);
  const adminRow = admin.locator(`[data-testid=job-row][data-job="${waiting}"]`);
  await admin.screenshot({ path: path.join(OUT, 'dashboard-queue.png'), fullPage: true });
  console.log(`screenshot: ${path.join(OUT, 'dashboard-queue.png')}`);
  await adminRow.locator('[data-testid=job-cancel]:not([disabled])').click();
  await waitFor('the cancel', async () => /cancelled/.test(await admin.locator('[data-testid=notice]').innerText()));
  assert.equal(show(waiting).state, 'cancelled');
  await admin.locator(`[data-testid=job-row][data-job="${waiting}"]`).waitFor({ state: 'detached' });

  // Drain and undrain GPU 3 from its card.
  await admin.goto(`http://127.0.0.1:${port}/#/fleet`);
  const card = admin.locator('[data-testid=gpu-card][data-gpu="3"]');
  await card.locator('[data-testid=gpu-drain]:not([disabled])').click();
  await card.locator('[data-testid=gpu-state-badge]', { hasText: 'drained' }).waitFor();
  assert.equal(JSON.parse(cli('gpus', '--json')).gpus[3].state, 'drained');
  await card.locator('[data-testid=gpu-undrain]').click();
  await card.locator('[data-testid=gpu-state-badge]', { hasText: 'ok' }).waitFor();
  cli('cancel', blocker);
  await admin.context().close();
});

test('job detail shows the log tail and the metric curves', async () => {
  const script = 'for i in 1 2 3 4; do echo "training line $i"; echo "{\\"step\\": $i, \\"loss\\": 0.$((10 - i))}" >> "$GPUHERD_METRICS_FILE"; done';
  const id = cli('submit', '--gpus', '0', '--name', 'dash-metrics', '--', 'sh', '-c', script).trim();
  await waitFor('the job to end', () => show(id).state === 'completed');
  // Without the token the job's facts show, its output does not: it is its owner's.
  const anonymous = await newPage(`http://127.0.0.1:${port}/#/jobs/${id}`);
  await waitFor('the refusal', async () => /API token/.test(await anonymous.locator('[data-testid=job-log]').innerText()));
  assert.doesNotMatch(await anonymous.locator('[data-testid=job-log]').innerText(), /training line/);
  await anonymous.context().close();
  const page = await newPage(cli('dashboard').trim());
  await page.goto(`http://127.0.0.1:${port}/#/jobs/${id}`);
  await waitFor('the log', async () => /training line 4/.test(await page.locator('[data-testid=job-log]').innerText()));
  await page.locator('[data-testid=job-metrics] .uplot').waitFor();
  assert.match(await page.locator('[data-testid=job-metrics]').innerText(), /loss/);
  await page.context().close();
});

test('pipelines show the DAG and the sweep with the token; the report downloads', async () => {
  const file = path.join(home, 'tiny.yaml');
  fs.writeFileSync(file, [
    'name: tiny',
    'defaults: {gpus: 0}',
    'steps:',
    '  train:',
    '    matrix: {lr: [0.1, 0.2]}',
    '    run: ["sh", "-c", "echo \'{\\"step\\": 1, \\"loss\\": ${{ matrix.lr }}}\' >> $GPUHERD_METRICS_FILE"]',
    '    objective: {metric: loss, mode: min}',
    '  summary:',
    '    needs: [train]',
    '    run: ["true"]',
    '',
  ].join('\n'));
  const run = JSON.parse(cli('run', file, '--wait', '--json'));
  const id = run.id;
  // Without the token a TCP caller sees no one's runs.
  const reader = await newPage(`http://127.0.0.1:${port}/#/pipelines`);
  await reader.locator('[data-testid=pipelines-empty]').waitFor();
  await reader.context().close();

  const page = await newPage(cli('dashboard').trim());
  await page.goto(`http://127.0.0.1:${port}/#/pipelines`);
  await page.locator('[data-testid=pipeline-row]').first().waitFor();
  await page.locator(`a[href="#/pipelines/${id}"]`).click();
  await page.locator('[data-testid=dag]').waitFor();
  assert.equal(await page.locator('[data-testid=dag-node]').count(), 3);
  assert.equal(await page.locator('[data-testid=dag-node][data-state=completed]').count(), 3);
  assert.equal(await page.locator('[data-testid=sweep-row]').count(), 3);
  assert.match(await page.locator('[data-testid=sweep-table]').innerText(), /train\[lr=0.1\]/);
  // The objective names the best point and ranks the sweep best first.
  assert.match(await page.locator('[data-testid=best-point]').innerText(), /Best of train by loss \(min\): train\[lr=0.1\] with loss = 0.100000 at step 1/);
  assert.match(await page.locator('[data-testid=sweep-row]').first().innerText(), /^1\s+train\[lr=0.1\]/);
  await page.screenshot({ path: path.join(OUT, 'dashboard-pipeline.png'), fullPage: true });
  console.log(`screenshot: ${path.join(OUT, 'dashboard-pipeline.png')}`);
  const [download] = await Promise.all([page.waitForEvent('download'),
    page.locator('[data-testid=pipeline-report]').click()]);
  const saved = path.join(OUT, download.suggestedFilename());
  await download.saveAs(saved);
  assert.match(fs.readFileSync(saved, 'utf8'), /<html[\s\S]*train\[lr=0.2\]/);
  await page.context().close();
});

test('a 3-second job: its chart spans its run, not years; the card shows used against share', async () => {
  const short = cli('submit', '--gpus', '1', '--name', 'dash-short', '--', 'sleep', '3').trim();
  const frac = cli('submit', '--gpus', '0.5', '--gpu-mem', '4GiB', '--name', 'dash-frac', '--', 'sleep', '60').trim();
  await waitFor('the short job to end', () => show(short).state === 'completed', 20000);
  const page = await newPage(cli('dashboard').trim());
  await page.goto(`http://127.0.0.1:${port}/#/jobs/${short}`);
  const chart = page.locator('[data-testid=job-gpu-chart]');
  await waitFor('readings in the job chart', async () => Number(await chart.getAttribute('data-points')) >= 2);
  const span = Number(await chart.getAttribute('data-span-s'));
  assert.ok(span >= 60 && span <= 120, `the axis spans ${span} s`);
  await page.screenshot({ path: path.join(OUT, 'dashboard-short-job.png'), fullPage: true });
  console.log(`screenshot: ${path.join(OUT, 'dashboard-short-job.png')}`);
  // On the fleet's card: the fraction's GPU memory, used against its share.
  await page.goto(`http://127.0.0.1:${port}/#/fleet`);
  await waitFor('used against share on a card', async () =>
    /2\.0 \/ 4\.0 GiB/.test((await page.locator('[data-testid=gpu-job-mem]').allInnerTexts()).join(' ')));
  await page.goto(`http://127.0.0.1:${port}/#/jobs/${frac}`);
  await waitFor('used against share on the job', async () => /2\.0 \/ 4\.0 GiB/.test(await page.locator('.facts').innerText()));
  cli('cancel', frac);
  await page.context().close();
});

test('64 GPUs fit one screen in the dense table; ranges, UTC toggle, a lost GPU without stale readings, alerts folded', async () => {
  const bigHome = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuherd-dashboard-64-'));
  const rules = path.join(bigHome, 'rules.yaml');
  // Every GPU's "idle" alert stays pending for an hour: routine, to be folded.
  fs.writeFileSync(rules, [
    'rules:',
    '  - name: quiet_gpu',
    '    expr: gpu_util_pct < 101',
    '    for: 1h',
    '    severity: warning',
    '    action: none',
    '    summary: idle for an hour',
    '  - name: gpu_xid_fatal',
    '    expr: sum(xids_fatal[5m]) > 0',
    '    severity: critical',
    '    action: notify',
    '    summary: fatal XID',
    '',
  ].join('\n'));
  const scenario = new URL('../examples/scenarios/big-box-64.yaml', import.meta.url).pathname;
  const big = spawn(GPUHERD, ['--home', bigHome, 'daemon', '--scenario', scenario, '--port', '0', '--interval', '500ms',
    '--alert-rules', rules], { stdio: ['ignore', fs.openSync(path.join(bigHome, 'daemon.out'), 'w'), 'inherit'] });
  const bigCli = (...args) => execFileSync(GPUHERD, ['--home', bigHome, ...args],
    { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    await waitFor('the 64-GPU daemon', () => {
      if (big.exitCode !== null) throw new Error(`the 64-GPU daemon exited (${big.exitCode})`);
      try { bigCli('status'); return true; } catch (e) { return false; }
    }, 30000);
    const bigPort = Number(fs.readFileSync(path.join(bigHome, 'api-port'), 'utf8'));
    const context = await browser.newContext({ viewport: { width: 1920, height: 1080 } });
    const page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto(`http://127.0.0.1:${bigPort}/`);
    await page.locator('[data-testid=gpu-row]').nth(63).waitFor();
    assert.equal(await page.locator('[data-testid=gpu-row]').count(), 64);
    // Every row is on the first screen, without scrolling.
    const bottom = await page.evaluate(() => Math.max(...[...document.querySelectorAll('[data-testid=gpu-row]')]
      .map((r) => r.getBoundingClientRect().bottom)));
    assert.ok(bottom <= 1080, `the last row ends at ${bottom} px`);
    await waitFor('heatmaps with readings', async () => page.evaluate(() =>
      [...document.querySelectorAll('[data-testid=gpu-heat]')].filter((c) => Number(c.dataset.points) >= 2).length >= 60));
    // GPU 41 falls off the bus: "–" for every reading, never its last numbers.
    const lost = page.locator('[data-testid=gpu-row][data-gpu="41"]');
    await lost.locator('[data-testid=gpu-state-badge]', { hasText: 'lost' }).waitFor({ timeout: 20000 });
    const cells = await lost.locator('td').allInnerTexts();
    assert.equal(cells[3].trim(), '–');
    assert.equal(cells[4].trim(), '–');
    assert.equal(cells[5].trim(), '–');
    assert.equal(cells[6].trim(), '–');
    assert.match(await page.locator('[data-testid=gpu-row][data-gpu="40"] td').nth(5).innerText(), /\d+ °C/);
    await page.screenshot({ path: path.join(OUT, 'dashboard-64-gpus.png') });
    console.log(`screenshot: ${path.join(OUT, 'dashboard-64-gpus.png')}`);

    // Longer ranges come from the per-minute rollups.
    const [week] = await Promise.all([
      page.waitForResponse((r) => r.url().includes('/v1/gpus/history?seconds=604800')),
      page.locator('[data-testid=range-7d]').click()]);
    assert.equal(week.status(), 200);
    assert.equal((await week.json()).source, 'rollups');
    await page.locator('[data-testid=heat-head]', { hasText: 'last 7 d' }).waitFor();
    assert.equal(await page.locator('[data-testid=range-source]').innerText(), 'per-minute rollups');
    await page.locator('[data-testid=range-1h]').click();
    await page.locator('[data-testid=heat-head]', { hasText: 'last 1 h' }).waitFor();

    // Times in UTC like the CLI, local on request (kept across reloads).
    assert.match(await page.locator('[data-testid=status-line]').innerText(), /UTC/);
    await page.locator('[data-testid=tz-toggle]').click();
    await waitFor('local times', async () => /local/.test(await page.locator('[data-testid=status-line]').innerText()));
    assert.equal(await page.locator('[data-testid=tz-toggle]').innerText(), 'times: local');
    await page.locator('[data-testid=tz-toggle]').click();

    // Alerts: the firing one first, the 64 routine pending ones folded.
    await page.goto(`http://127.0.0.1:${bigPort}/#/alerts`);
    await page.locator('[data-testid=alerts-table] [data-testid=alert-row][data-state=firing]').first().waitFor({ timeout: 20000 });
    assert.equal(await page.locator('[data-testid=alerts-table] [data-testid=alert-row]').first().getAttribute('data-state'), 'firing');
    assert.equal(await page.locator('[data-testid=alerts-table] [data-testid=alert-row][data-state=pending]').count(), 0);
    const fold = page.locator('[data-testid=pending-alerts]');
    assert.match(await fold.locator('summary').innerText(), /^6[34] pending alerts/);
    assert.equal(await fold.locator('[data-testid=pending-table]').isVisible(), false);
    // The log leaves their pending transitions out until asked.
    assert.doesNotMatch(await page.locator('[data-testid=events-table]').innerText(), /alert\.pending/);
    assert.match(await page.locator('[data-testid=events-table]').innerText(), /gpu\.lost/);
    await page.locator('[data-testid=show-pending-events]').check();
    await waitFor('the pending events', async () => /alert\.pending/.test(await page.locator('[data-testid=events-table]').innerText()));
    await page.screenshot({ path: path.join(OUT, 'dashboard-64-alerts.png') });
    console.log(`screenshot: ${path.join(OUT, 'dashboard-64-alerts.png')}`);
    await context.close();
  } finally {
    try { bigCli('stop'); } catch (e) { big.kill('SIGTERM'); }
    await new Promise((r) => { if (big.exitCode !== null) r(); else big.on('exit', r); });
    fs.rmSync(bigHome, { recursive: true, force: true });
  }
});

test('self-healing: a quarantined GPU says so on its card and in the table, since when and why; its passport opens', async () => {
  const healHome = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuherd-dashboard-heal-'));
  const scenario = path.join(healHome, 'xid48.yaml');
  fs.writeFileSync(scenario, 'seed: 3\ngpus: [{model: a100-40gb, count: 2}]\nfaults:\n  - {at: 2s, gpu: 0, kind: xid, xid: 48}\n');
  // --requalify-after 0: the card stays quarantined for the test to look at.
  const heal = spawn(GPUHERD, ['--home', healHome, 'daemon', '--scenario', scenario, '--port', '0', '--interval', '200ms',
    '--requalify-after', '0'], { stdio: ['ignore', fs.openSync(path.join(healHome, 'daemon.out'), 'w'), 'inherit'] });
  const healCli = (...args) => execFileSync(GPUHERD, ['--home', healHome, ...args],
    { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    await waitFor('the self-healing daemon', () => {
      if (heal.exitCode !== null) throw new Error(`the daemon exited (${heal.exitCode})`);
      try { healCli('status'); return true; } catch (e) { return false; }
    }, 30000);
    const healPort = Number(fs.readFileSync(path.join(healHome, 'api-port'), 'utf8'));
    const context = await browser.newContext({ viewport: { width: 1500, height: 1000 } });
    const page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    const passportReads = new Map();  // GPU index -> requests for its passport
    page.on('request', (r) => {
      const m = new URL(r.url()).pathname.match(/^\/v1\/gpus\/(\d+)\/passport$/);
      if (m) passportReads.set(Number(m[1]), (passportReads.get(Number(m[1])) || 0) + 1);
    });
    await page.goto(`http://127.0.0.1:${healPort}/#/fleet`);
    await page.locator('[data-testid=layout-cards]').click();
    const card = page.locator('[data-testid=gpu-card][data-gpu="0"]');
    await card.locator('[data-testid=gpu-heal-badge]', { hasText: 'quarantined' }).waitFor({ timeout: 20000 });
    const line = await card.locator('[data-testid=gpu-heal]').innerText();
    assert.match(line, /^self-heal: quarantined since \d\d\/\d\d, \d\d:\d\d:\d\d UTC \(\d+ (s|min) ago\): .*XID 48/);
    assert.match(line, /\[rule fatal_fault\]/);
    // GPU 1 is in service: no badge, no line.
    const other = page.locator('[data-testid=gpu-card][data-gpu="1"]');
    assert.equal(await other.locator('[data-testid=gpu-heal-badge]').count(), 0);
    assert.equal(await other.locator('[data-testid=gpu-heal]').isVisible(), false);
    // The passport, read when opened.
    await card.locator('[data-testid=gpu-passport] summary').click();
    await card.locator('[data-testid=passport-state]', { hasText: 'in_service → quarantined' }).waitFor();
    await card.locator('[data-testid=passport-incident]', { hasText: 'xid 48' }).first().waitFor();
    await page.screenshot({ path: path.join(OUT, 'dashboard-self-heal.png'), fullPage: true });
    console.log(`screenshot: ${path.join(OUT, 'dashboard-self-heal.png')}`);
    // The dense table: the badge beside the GPU's state, why in its title.
    await page.locator('[data-testid=layout-dense]').click();
    const row = page.locator('[data-testid=gpu-row][data-gpu="0"]');
    await row.locator('[data-testid=gpu-heal-badge]', { hasText: 'quarantined' }).waitFor();
    assert.match(await row.locator('td').nth(2).getAttribute('title'), /self-heal: quarantined since .*XID 48/);
    assert.equal(await page.locator('[data-testid=gpu-row][data-gpu="1"] [data-testid=gpu-heal-badge]').count(), 0);
    await page.locator('[data-testid=layout-cards]').click();
    // Open, the passport follows the card: an operator returns the GPU and
    // it shows without being reopened. A closed card's is never read.
    await card.locator('[data-testid=gpu-passport] summary').click();
    await card.locator('[data-testid=passport-state]', { hasText: 'in_service → quarantined' }).waitFor();
    const readsWhenOpened = passportReads.get(0);
    healCli('undrain', '0');
    await card.locator('[data-testid=passport-state]', { hasText: 'quarantined → in_service' }).waitFor({ timeout: 15000 });
    assert.equal(await card.locator('[data-testid=gpu-passport]').getAttribute('open'), '');
    assert.ok(passportReads.get(0) > readsWhenOpened, `GPU 0's passport read ${passportReads.get(0)} times`);
    assert.equal(passportReads.get(1) || 0, 0, "GPU 1's passport is closed and must not be read");
    await card.locator('[data-testid=gpu-passport] summary').click();
    await page.waitForTimeout(300);  // a read already under way is counted
    const readsWhenClosed = passportReads.get(0);
    await page.waitForTimeout(3500);  // longer than a poll
    assert.equal(passportReads.get(0), readsWhenClosed, 'a closed passport is read again');
    await context.close();
  } finally {
    try { healCli('stop'); } catch (e) { heal.kill('SIGTERM'); }
    await new Promise((r) => { if (heal.exitCode !== null) r(); else heal.on('exit', r); });
    fs.rmSync(healHome, { recursive: true, force: true });
  }
});

test('alerts and events view lists the daemon events; nothing left loopback', async () => {
  const page = await newPage(`http://127.0.0.1:${port}/#/alerts`);
  await page.locator('[data-testid=event-row]').first().waitFor();
  assert.match(await page.locator('[data-testid=events-table]').innerText(), /daemon\.start/);
  assert.match(await page.locator('[data-testid=events-table]').innerText(), /job\.submitted|job\./);
  await page.context().close();
  assert.deepEqual(offLoopback, []);
  assert.deepEqual(pageErrors, []);
});
