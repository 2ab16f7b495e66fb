// The web console in a real browser (Debian's chromium driven by playwright-core) against a
// real `gpucloud up`: sign in, see the nodes, submit the example job from YAML and watch it go
// Pending -> Running -> Succeeded without a reload while its logs arrive, cancel another job, a
// YAML error shown at its line, a tenant kept to its namespace with a 403 that names the
// action, a simulator report drawn; axe-core finds no serious violation on any page. Every
// step leaves a screenshot in the artifacts directory.
// Usage: node --test console_test.mjs  (env: GPUCLOUD, GPUCTL, SOURCE_DIR, ARTIFACTS, CHROMIUM)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { UpCluster, waitFor } from './cluster.mjs';

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const env = (k, d) => process.env[k] || d;
const SOURCE = env('SOURCE_DIR', fileURLToPath(new URL('../..', import.meta.url)));
const ARTIFACTS = env('ARTIFACTS', join(SOURCE, 'build', 'console-artifacts'));
const CHROMIUM = env('CHROMIUM', '/usr/bin/chromium');

let up;
let browser;
let aliceToken;
mkdirSync(ARTIFACTS, { recursive: true });

before(async () => {
  up = await new UpCluster({ gpucloud: env('GPUCLOUD', join(SOURCE, 'build/apps/gpucloud')),
    gpuctl: env('GPUCTL', join(SOURCE, 'build/apps/gpuctl')), workdir: SOURCE }).start();
  aliceToken = up.tenant('alice', 'team-a');
  up.tenant('bob', 'team-b');
  up.ctl('run', '--name', 'bob-secret', '-n', 'team-b', '--gpus', '0', '--', 'sleep', '1');
  browser = await chromium.launch({ executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
});

after(async () => {
  if (browser) await browser.close();
  if (up) await up.stop();
});

/** A new tab signed in with `token`; its console errors are collected in page.errors. */
async function signedIn(token, hash = '#/overview') {
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') page.errors.push(m.text()); });
  await page.goto(`${up.url}/ui/${hash}`);
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#nav').waitFor({ state: 'visible' });
  return page;
}

async function shot(page, name) {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** axe-core's serious and critical violations on the page as it is now. */
async function axe(page) {
  // Evaluated through the DevTools protocol: the page's CSP (rightly) refuses inline scripts.
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE);
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join('; ')})`);
  });
  return result;
}

/** A report.json from `gpucloud sim` over a five-job trace, FIFO against LAS. */
function simReport() {
  const dir = join(up.tmp, 'sim');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'trace.csv'), 'job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n' +
    '0,1,0,10,vgg19,100,30\n1,8,30,10,vgg11,300,23\n2,2,40,10,resnet,50,5\n3,4,60,10,resnet,500,5\n' +
    '4,1,61,10,resnet,20,5\n');
  execFileSync(up.gpucloud, ['sim', '--trace', join(dir, 'trace.csv'), '--cluster', 'tiresias',
    '--compare', 'fifo', '--compare', 'las', '--out', dir], { stdio: 'ignore' });
  return join(dir, 'report.json');
}

const HELLO = `apiVersion: gpucloud/v1
kind: Job
metadata:
  name: hello
spec:
  tasks:
  - name: main
    replicas: 1
    command: [sh, -c, "echo hello from rank $RANK; sleep 2; echo step 2 done; sleep 1; echo bye"]
    resources:
      gpu:
        count: 1
`;

test('the console is served without a token, with a strict CSP, and asks to sign in', async () => {
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const page = await context.newPage();
  const res = await page.goto(`${up.url}/ui/`);
  assert.equal(res.status(), 200);
  assert.match(res.headers()['content-security-policy'], /script-src 'self'/);
  await page.getByLabel('API token').waitFor();
  await page.getByLabel('API token').fill('not-a-token');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('That token is not valid.').waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('gpucloud.token')), null);
  assert.ok(!page.url().includes('not-a-token'));
  await shot(page, '01-sign-in');
  assert.deepEqual(await axe(page), []);
  await context.close();
});

test('an admin sees the overview and the nodes of the cluster', async () => {
  const page = await signedIn(up.token);
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  const gpus = page.getByRole('table', { name: 'GPUs by type' });
  await gpus.getByRole('cell', { name: 'H100-80GB' }).waitFor();
  // The allocation-beside-utilization chart, drawn by Chart.js once it loaded.
  await page.waitForFunction(() => window.Chart?.getChart(document.querySelector('canvas'))
    ?.data.labels.includes('H100-80GB'));
  await shot(page, '02-overview');
  assert.deepEqual(await axe(page), []);
  await page.getByRole('link', { name: 'Nodes' }).click();
  await page.getByRole('link', { name: 'console', exact: true }).waitFor();
  await page.waitForFunction(() => document.querySelector('canvas.gpu-grid')?.dataset.cells === '4');
  // The pointer over the first cell names its GPU; a click opens its node.
  const box = await page.locator('canvas.gpu-grid').boundingBox();
  await page.mouse.move(box.x + 8, box.y + 8);
  assert.match(await page.locator('canvas.gpu-grid').getAttribute('title'), /^console GPU 0 \(H100-80GB\): \d+% utilized$/);
  await shot(page, '03-nodes');
  assert.deepEqual(await axe(page), []);
  await page.getByRole('link', { name: 'console', exact: true }).click();
  await page.getByRole('heading', { name: 'Node console' }).waitFor();
  await page.getByRole('table', { name: 'GPU topology matrix' }).waitFor();
  await page.getByRole('button', { name: 'Cordon', exact: true }).waitFor();  // an admin may
  await shot(page, '04-node');
  assert.deepEqual(await axe(page), []);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('a job submitted from YAML goes Pending -> Running -> Succeeded live; another is cancelled', async () => {
  // Every GPU taken, so that the new job waits until the blocker is cancelled.
  up.ctl('run', '--name', 'blocker', '--gpus', '4', '--', 'sleep', '600');
  await waitFor(() => up.phase('default', 'blocker') === 'Running', 30, 'the blocker to run', 200);
  const page = await signedIn(up.token, '#/submit');
  await page.getByLabel('Job manifest (YAML or JSON)').fill(HELLO);
  // Record every phase the job page shows, from the first, without reloading.
  await page.evaluate(() => {
    window.phasesSeen = [];
    new MutationObserver(() => {
      const p = document.querySelector('h1 .phase')?.textContent;
      if (p && window.phasesSeen.at(-1) !== p) window.phasesSeen.push(p);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await page.getByRole('button', { name: 'Submit' }).click();
  await page.getByRole('heading', { name: /Job default\/hello/ }).waitFor();
  await page.locator('h1 .phase', { hasText: 'Pending' }).waitFor();
  await shot(page, '05-job-pending');
  assert.deepEqual(await axe(page), []);

  const other = await signedIn(up.token, '#/job/default/blocker');
  await other.getByRole('button', { name: 'Cancel' }).click();
  await other.locator('h1 .phase', { hasText: 'Cancelled' }).waitFor({ timeout: 30000 });
  await shot(other, '06-blocker-cancelled');
  await other.context().close();

  await page.locator('h1 .phase', { hasText: 'Succeeded' }).waitFor({ timeout: 60000 });
  const seen = await page.evaluate(() => window.phasesSeen);
  const at = (p) => seen.indexOf(p);
  assert.ok(at('Pending') >= 0 && at('Running') > at('Pending') && at('Succeeded') > at('Running'),
    `phases seen: ${seen.join(' -> ')}`);
  const logs = page.getByLabel('Log output');
  await waitFor(async () => (await logs.textContent()).includes('bye'), 20, 'the logs');
  assert.match(await logs.textContent(), /hello from rank 0\nstep 2 done\nbye/);
  await page.getByRole('table', { name: 'Events' }).getByText('Scheduled').first().waitFor();
  await shot(page, '07-job-succeeded');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('a YAML error is shown at its line and nothing is created', async () => {
  const page = await signedIn(up.token, '#/submit');
  await page.getByLabel('Job manifest (YAML or JSON)').fill(HELLO.replace('name: hello', 'name: broken')
    .replace('replicas: 1', 'replicas: -2'));
  await page.getByRole('button', { name: 'Submit' }).click();
  await page.getByText(/Line 8: spec\.tasks\[0\]\.replicas: must be >= 1/).waitFor();
  assert.equal(await page.locator('ol.lines li.error').count(), 1);
  assert.match(await page.locator('ol.lines li.error').textContent(), /replicas: -2/);
  await page.getByRole('button', { name: 'go to line' }).click();
  assert.equal(await page.evaluate(() => {
    const t = document.getElementById('manifest');
    return t.value.slice(t.selectionStart, t.selectionEnd);
  }), '    replicas: -2');
  await shot(page, '08-yaml-error');
  assert.deepEqual(await axe(page), []);
  assert.throws(() => up.ctl('get', 'job', 'broken'));
  await page.context().close();
});

test('jobs table, queues and the simulator report', async () => {
  const page = await signedIn(up.token, '#/jobs');
  const table = page.getByRole('table', { name: 'Jobs' });
  await table.getByRole('link', { name: 'hello' }).waitFor();
  await page.getByLabel('Phase').selectOption('Cancelled');
  await table.getByRole('link', { name: 'hello' }).waitFor({ state: 'detached' });
  await table.getByRole('link', { name: 'blocker' }).waitFor();
  await shot(page, '09-jobs');
  assert.deepEqual(await axe(page), []);
  await page.getByRole('link', { name: 'Queues' }).click();
  // The scheduler's answers: 2 x 2 GPUs fit on the idle node, 8 on one node never do.
  await page.getByLabel('Replicas').fill('2');
  await page.getByLabel('GPUs per replica').fill('2');
  await page.getByRole('button', { name: 'Could it start now?' }).click();
  await page.getByText('Yes, now: on console, console.').waitFor();
  await page.getByLabel('Replicas').fill('1');
  await page.getByLabel('GPUs per replica').fill('8');
  await page.getByRole('button', { name: 'Could it start now?' }).click();
  await page.getByText(/^Never on this cluster: .*8/).waitFor();
  await shot(page, '10-queues');
  assert.deepEqual(await axe(page), []);
  await page.getByRole('link', { name: 'Simulator' }).click();
  await page.getByLabel(/Open a report.json/).setInputFiles(simReport());
  await page.getByRole('table', { name: 'Runs' }).getByRole('cell', { name: 'las' }).waitFor();
  await page.getByRole('img', { name: 'Job completion time CDF' }).waitFor();
  assert.equal(await page.locator('canvas').count(), 2);
  // Chart.js drew them (it sizes the canvas it takes over).
  await page.waitForFunction(() => [...document.querySelectorAll('canvas')].every((c) => c.width > 0 &&
    window.Chart?.getChart(c)));
  await shot(page, '11-sim');
  assert.deepEqual(await axe(page), []);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('a tenant sees its namespace only, and a 403 that names the action', async () => {
  up.ctl('run', '--name', 'alice-job', '-n', 'team-a', '--gpus', '0', '--', 'sleep', '1');
  const page = await signedIn(aliceToken, '#/jobs');
  const table = page.getByRole('table', { name: 'Jobs' });
  await table.getByRole('link', { name: 'alice-job' }).waitFor();
  assert.equal(await table.getByRole('link', { name: 'bob-secret' }).count(), 0);
  assert.equal(await table.getByRole('link', { name: 'hello' }).count(), 0);
  await page.goto(`${up.url}/ui/#/job/team-b/bob-secret`);
  const alert = page.getByRole('alert');
  await alert.getByText(/Not allowed: .*jobs:Get/).waitFor();
  assert.equal(await page.getByRole('button', { name: 'Cancel' }).isVisible(), false);
  await shot(page, '12-tenant-403');
  await page.goto(`${up.url}/ui/#/node/console`);
  await page.getByRole('heading', { name: 'Node console' }).waitFor();
  await page.getByRole('table', { name: 'GPUs of console' }).waitFor();
  assert.equal(await page.getByRole('button', { name: 'Cordon', exact: true }).isVisible(), false);
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByText('You are signed out.').waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('gpucloud.token')), null);
  await page.context().close();
});
