// The console's performance against a loaded server (scripts/bench-console runs it while
// cluster_load keeps 2,000 agents heartbeating over 15,000 jobs), in headless Debian chromium:
//   overview_ms  navigation to the overview's figures painted (cards and GPU types filled)
//   jobs_first_rows_ms  navigation to the jobs table's first rows on screen (the first page)
//   jobs_ms      navigation to the jobs table listing every job, rows on screen
//   phase_ms     a job's phase committed by the server (status.finishedMs of a cancel) to the
//                job page showing it, median of 5
//   longtask_*   the longest main-thread task: on the overview in its first 2 s after the
//                figures; on the jobs page while it loads, and over WINDOW_S seconds of the live
//                load after it loaded
//   nodes_*      the nodes page: every GPU cell drawn (16,000 at 2,000 agents), and its longest
//                tasks while it loads and over WINDOW_S seconds after (a utilization refresh
//                of every node falls in it)
// Usage: node bench_console.mjs URL TOKEN [RUNS=3] [WINDOW_S=20]; prints one JSON line per run.
import { chromium } from 'playwright-core';

const [url, token, runsArg, windowArg] = process.argv.slice(2);
const runs = Number(runsArg || 3);
const windowS = Number(windowArg || 20);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });

async function page() {
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 900 } });
  await context.addInitScript((t) => {
    sessionStorage.setItem('gpucloud.token', t);
    window.longTasks = [];
    new PerformanceObserver((l) => {
      for (const e of l.getEntries()) window.longTasks.push({ at: e.startTime, ms: e.duration });
    }).observe({ type: 'longtask', buffered: true });
  }, token);
  return context.newPage();
}

async function api(p, method, path, body) {
  return p.evaluate(async ([m, u, b, t]) => {
    const r = await fetch(u, { method: m, body: b, headers: { Authorization: `Bearer ${t}`,
      'Content-Type': 'application/json' } });
    return { status: r.status, body: await r.json() };
  }, [method, path, body, token]);
}

async function once(run) {
  const out = { run };
  // Overview.
  let p = await page();
  await p.goto(`${url}/ui/#/overview`);
  out.overview_ms = await (await p.waitForFunction(() => {
    const cards = [...document.querySelectorAll('.card .v')];
    const types = document.querySelectorAll('table[aria-label="GPUs by type"] tbody tr');
    return cards.length && cards.slice(0, 4).every((c) => c.textContent !== '…') && types.length ?
      performance.now() : 0;
  }, null, { timeout: 60000, polling: 'raf' })).jsonValue();
  out.overview_fcp_ms = await p.evaluate(() =>
    performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null);
  await p.waitForTimeout(2000);  // the chart, the nodes and the jobs arriving after the figures
  out.overview_longtask_max_ms = await p.evaluate(() => Math.max(0, ...window.longTasks.map((t) => t.ms)));
  await p.context().close();

  // Jobs table: every job listed and rows on screen; then the live load for WINDOW_S.
  p = await page();
  await p.goto(`${url}/ui/#/jobs`);
  // Interactive: the first page's rows on screen (they scroll and filter while the rest loads).
  out.jobs_first_rows_ms = await (await p.waitForFunction(() =>
    document.querySelector('tr.row a') ? performance.now() : 0,
  null, { timeout: 120000, polling: 'raf' })).jsonValue();
  out.jobs_ms = await (await p.waitForFunction(() => {
    const m = /^(\d+) jobs$/.exec(document.querySelector('#jobs-count')?.textContent || '');
    return m && Number(m[1]) > 0 && document.querySelector('tr.row a') ? performance.now() : 0;
  }, null, { timeout: 120000, polling: 'raf' })).jsonValue();
  out.jobs_listed = Number(/^(\d+)/.exec(await p.locator('#jobs-count').textContent())[1]);
  const loadedAt = out.jobs_ms;
  await p.waitForTimeout(windowS * 1000);
  const tasks = await p.evaluate(() => window.longTasks);
  out.longtask_load_max_ms = Math.max(0, ...tasks.filter((t) => t.at <= loadedAt).map((t) => t.ms));
  out.longtask_live_max_ms = Math.max(0, ...tasks.filter((t) => t.at > loadedAt).map((t) => t.ms));
  out.longtask_live_count = tasks.filter((t) => t.at > loadedAt).length;
  // A scroll to the middle of the table and back: rows on screen within a frame or two.
  out.scroll_ms = await p.evaluate(async () => {
    const s = document.querySelector('.scroller');
    const t0 = performance.now();
    s.scrollTop = s.scrollHeight / 2;
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    return performance.now() - t0;
  });
  await p.context().close();

  // Nodes: every GPU's cell drawn; then the live load, with a utilization refresh (every 15 s).
  p = await page();
  await p.goto(`${url}/ui/#/nodes`);
  out.nodes_ms = await (await p.waitForFunction(() =>
    Number(document.querySelector('canvas.gpu-grid')?.dataset.cells || 0) >= 16000 ? performance.now() : 0,
  null, { timeout: 120000, polling: 'raf' })).jsonValue();
  const nodesAt = out.nodes_ms;
  await p.waitForTimeout(windowS * 1000);
  const nodeTasks = await p.evaluate(() => window.longTasks);
  out.nodes_longtask_load_max_ms = Math.max(0, ...nodeTasks.filter((t) => t.at <= nodesAt).map((t) => t.ms));
  out.nodes_longtask_live_max_ms = Math.max(0, ...nodeTasks.filter((t) => t.at > nodesAt).map((t) => t.ms));
  await p.context().close();

  // Phase change: a job that cannot fit (Pending), cancelled; its page shows Cancelled.
  const phases = [];
  for (let i = 0; i < 5; i++) {
    p = await page();
    await p.goto(`${url}/ui/#/overview`);
    const name = `console-bench-${run}-${i}`;
    const created = await api(p, 'POST', '/apis/gpucloud/v1/namespaces/default/jobs', JSON.stringify({
      apiVersion: 'gpucloud/v1', kind: 'Job', metadata: { name },
      spec: { tasks: [{ name: 'main', replicas: 1, command: ['sleep', '1'],
        resources: { gpu: { count: 4096 } } }] } }));
    if (created.status !== 201) throw new Error(`create: ${JSON.stringify(created)}`);
    await p.evaluate((n) => { location.hash = `#/job/default/${n}`; }, name);
    // The page shows the job, and its watch of the jobs is live (listed, then following).
    await p.waitForFunction(() => document.querySelector('h1 .phase')?.textContent === 'Pending' &&
      document.body.dataset.jobsSynced === 'true', null, { timeout: 120000 });
    await api(p, 'POST', `/apis/gpucloud/v1/namespaces/default/jobs/${name}/cancel`, '');
    const shownAt = await (await p.waitForFunction(() =>
      document.querySelector('h1 .phase')?.textContent === 'Cancelled' ? Date.now() : 0,
    null, { timeout: 60000, polling: 'raf' })).jsonValue();
    const job = (await api(p, 'GET', `/apis/gpucloud/v1/namespaces/default/jobs/${name}`)).body;
    const committed = job.status?.finishedMs;
    if (committed) phases.push(shownAt - committed);
    await p.context().close();
  }
  phases.sort((a, b) => a - b);
  out.phase_ms = phases[Math.floor(phases.length / 2)] ?? null;
  out.phase_max_ms = phases.at(-1) ?? null;
  console.log(JSON.stringify(out));
}

try {
  for (let r = 1; r <= runs; r++) await once(r);
} finally {
  await browser.close();
}
