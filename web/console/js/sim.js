// @ts-check
// Simulator reports: a report.json from `gpucloud sim`, opened from disk (it never leaves the
// tab), shown as report.html shows it: the summary per policy, utilization over time and the
// JCT CDF.
import { h, clear, loadChart, num, table } from './dom.js';

const COLOURS = ['#1f5fa8', '#e08a00', '#1d6b35', '#b3261e', '#6f42c1', '#4a5360'];

/** @param {import('./app.js').Ctx} _ctx @param {HTMLElement} main */
export function render(_ctx, main) {
  const file = /** @type {HTMLInputElement} */ (h('input', { id: 'report', type: 'file', accept: '.json,application/json' }));
  const out = h('div');
  main.append(h('h1', null, 'Simulator report'),
    h('p', null, h('label', { for: 'report' }, 'Open a report.json from gpucloud sim '), file), out);
  /** @type {any[]} */
  let charts = [];
  file.addEventListener('change', async () => {
    const f = file.files?.[0];
    if (!f) return;
    try {
      await show(JSON.parse(await f.text()));
    } catch (e) {
      clear(out);
      out.append(h('p', { class: 'bad', role: 'alert' }, `Not a report.json: ${/** @type {any} */ (e).message}`));
    }
  });
  /** @param {any} r */
  async function show(r) {
    charts.forEach((c) => c.destroy());
    charts = [];
    clear(out);
    const runs = r.runs || [];
    if (!Array.isArray(runs) || !r.cluster) throw new Error('no runs or cluster');
    out.append(h('p', null, `Trace ${r.trace?.file} (${r.trace?.jobs} jobs) on cluster ` +
      `${r.cluster.name} (${r.cluster.nodes} nodes, ${r.cluster.gpus} GPUs).`),
    table('Runs', ['Policy', 'Finished', 'Mean JCT (s)', 'Median JCT (s)', 'p95 JCT (s)',
      'Mean wait (s)', 'Makespan (s)', 'Utilization', 'Preemptions', 'Cost ($)'],
    runs.map((/** @type {any} */ x) => [x.policy, `${x.jobs?.finished} / ${x.jobs?.total}`,
      num(x.jct_s?.mean ?? 0), num(x.jct_s?.median ?? 0), num(x.jct_s?.p95 ?? 0),
      num(x.queueing_delay_s?.mean ?? 0), x.makespan_s ?? '—',
      `${((x.utilization?.mean ?? 0) * 100).toFixed(1)}%`, x.preemptions ?? 0,
      num(Object.values(x.cost_usd || {}).reduce((/** @type {number} */ a, /** @type {any} */ b) => a + Number(b), 0), 2)]),
    new Set([2, 3, 4, 5, 6, 7, 8, 9])));
    const util = /** @type {HTMLCanvasElement} */ (h('canvas', { role: 'img', 'aria-label': 'GPU utilization over time' }));
    const cdf = /** @type {HTMLCanvasElement} */ (h('canvas', { role: 'img', 'aria-label': 'Job completion time CDF' }));
    out.append(h('div', { class: 'charts' }, h('div', { class: 'chart' }, util), h('div', { class: 'chart' }, cdf)));
    const Chart = await loadChart().catch(() => null);
    if (!Chart) return;
    const line = (/** @type {string} */ label, /** @type {any[]} */ data, /** @type {number} */ i, dash = false) =>
      ({ label, data, borderColor: COLOURS[i % COLOURS.length], pointRadius: 0, borderWidth: 1.5,
        borderDash: dash ? [4, 3] : [] });
    charts.push(new Chart(util, { type: 'line', data: { datasets: runs.flatMap((/** @type {any} */ x, /** @type {number} */ i) => [
      line(x.policy, (x.utilization?.series || []).map((/** @type {number[]} */ p) => ({ x: p[0] / 3600, y: p[1] })), i),
      line(`${x.policy} (peak)`, (x.utilization?.series || []).map((/** @type {number[]} */ p) => ({ x: p[0] / 3600, y: p[2] })), i, true),
    ]) }, options: { animation: false, maintainAspectRatio: false, parsing: false,
      plugins: { title: { display: true, text: 'GPU utilization over time' } },
      scales: { x: { type: 'linear', title: { display: true, text: 'hours' } },
        y: { min: 0, max: 1, title: { display: true, text: 'allocated / all GPUs' } } } } }));
    charts.push(new Chart(cdf, { type: 'line', data: { datasets: runs.map((/** @type {any} */ x, /** @type {number} */ i) =>
      line(x.policy, (x.jct_cdf || []).map((/** @type {number[]} */ p) => ({ x: Math.max(1, p[0]), y: p[1] })), i)) },
    options: { animation: false, maintainAspectRatio: false, parsing: false,
      plugins: { title: { display: true, text: 'Job completion time (CDF)' } },
      scales: { x: { type: 'logarithmic', title: { display: true, text: 'seconds (log scale)' } },
        y: { min: 0, max: 1, title: { display: true, text: 'fraction of jobs' } } } } }));
  }
  return () => charts.forEach((c) => c.destroy());
}
