// @ts-check
// Overview: GPUs by type (allocated, free, unhealthy, at risk) with their utilization beside
// allocation, jobs by phase, pending jobs per queue with the scheduler's reason, the cluster's
// availability and goodput, and the cost so far today.
import { API } from './api.js';
import { h, clear, loadChart, onFrame, table, num } from './dom.js';
import { gpuTypes } from './model.js';

/** @param {import('./app.js').Ctx} ctx @param {HTMLElement} main */
export function render(ctx, main) {
  const cards = h('div', { class: 'cards', 'aria-label': 'Cluster at a glance', role: 'group' });
  const types = h('section', { 'aria-labelledby': 'h-gpus' });
  const phases = h('section', { 'aria-labelledby': 'h-phases' });
  const pending = h('section', { 'aria-labelledby': 'h-pending' });
  const canvas = /** @type {HTMLCanvasElement} */ (h('canvas', {
    role: 'img', 'aria-label': 'Allocated and utilized GPUs by type' }));
  main.append(h('h1', null, 'Overview'), cards,
    h('div', { class: 'charts' },
      h('section', { 'aria-labelledby': 'h-gpus' }, h('h2', { id: 'h-gpus' }, 'GPUs by type'), types),
      h('div', { class: 'chart' }, canvas)),
    h('h2', { id: 'h-phases' }, 'Jobs by phase'), phases,
    h('h2', { id: 'h-pending' }, 'Pending jobs by queue'), pending);
  /** @type {any} */
  let summary = null;
  let costToday = /** @type {number | null} */ (null);
  /** @type {any} */
  let chart = null;

  const card = (/** @type {string} */ k, /** @type {string} */ v) =>
    h('div', { class: 'card' }, h('div', { class: 'v' }, v), h('div', { class: 'k' }, k));

  function draw() {
    clear(cards);
    const byType = gpuTypes(ctx.nodes.items.values(), summary);
    let total = 0;
    let alloc = 0;
    for (const t of byType.values()) {
      total += t.total;
      alloc += t.allocated;
    }
    cards.append(
      card('GPUs allocated', summary || ctx.nodes.synced ? `${num(alloc)} / ${total}` : '…'),
      card('Nodes ready', summary ? `${summary.nodes.ready} / ${summary.nodes.ready + summary.nodes.notReady}` : '…'),
      card('Availability', summary ? `${(summary.availability * 100).toFixed(1)}%` : '…'),
      card('Goodput', summary ? `${(summary.jobGpuSeconds.goodput * 100).toFixed(1)}%` : '…'),
      card('Cost today', costToday === null ? '…' : `$${costToday.toFixed(2)}`));
    clear(types);
    types.append(table('GPUs by type', ['Type', 'Total', 'Allocated', 'Free', 'Unhealthy',
      'At risk', 'Utilization'], [...byType.entries()].map(([type, t]) => [type, t.total,
      num(t.allocated), num(Math.max(0, t.total - t.allocated - t.unhealthy)), t.unhealthy,
      t.atRisk, t.measured ? `${num(t.utilization / t.measured)}%` : '—']),
    new Set([1, 2, 3, 4, 5, 6])));
    drawChart(byType);
    const counts = new Map();
    const queues = new Map();
    for (const j of ctx.jobs.items.values()) {
      const phase = j.status?.phase || 'Pending';
      counts.set(phase, (counts.get(phase) || 0) + 1);
      if (phase !== 'Pending') continue;
      const q = j.spec?.queue || 'default';
      const e = queues.get(q) || { n: 0, reasons: new Map() };
      e.n++;
      const why = j.status?.message || j.status?.reason || 'not yet considered';
      e.reasons.set(why, (e.reasons.get(why) || 0) + 1);
      queues.set(q, e);
    }
    clear(phases);
    phases.append(ctx.jobs.synced ? table('Jobs by phase', ['Phase', 'Jobs'],
      [...counts.entries()].sort().map(([p, n]) => [h('a', { href: `#/jobs?phase=${p}` }, p), n]),
      new Set([1])) : h('p', null, 'Loading jobs…'));
    clear(pending);
    pending.append(queues.size === 0 ? h('p', { class: 'muted' }, 'No job is pending.') :
      table('Pending jobs by queue', ['Queue', 'Pending', 'Most common reason'],
        [...queues.entries()].sort().map(([q, e]) => {
          const top = [...e.reasons.entries()].sort((a, b) => b[1] - a[1])[0];
          return [q, e.n, `${top[0]}${top[1] < e.n ? ` (${top[1]} of ${e.n})` : ''}`];
        }), new Set([1])));
  }

  /** @param {Map<string, any>} byType */
  function drawChart(byType) {
    const Chart = /** @type {any} */ (window).Chart;
    if (!Chart) {  // drawn once it has loaded (the next change redraws it too)
      loadChart().then(() => { if (alive) drawChart(byType); }, () => {});
      return;
    }
    const labels = [...byType.keys()];
    const allocated = labels.map((t) => byType.get(t).allocated);
    const used = labels.map((t) => {
      const e = byType.get(t);
      return e.measured ? (e.utilization / e.measured / 100) * e.total : 0;
    });
    if (chart) {
      chart.data.labels = labels;
      chart.data.datasets[0].data = allocated;
      chart.data.datasets[1].data = used;
      chart.update('none');
      return;
    }
    chart = new Chart(canvas, {
      type: 'bar',
      data: { labels, datasets: [
        { label: 'Allocated GPUs', data: allocated, backgroundColor: '#1f5fa8' },
        { label: 'Utilized (GPU-equivalents)', data: used, backgroundColor: '#e08a00' },
      ] },
      options: { animation: false, maintainAspectRatio: false, scales: { y: { beginAtZero: true } } },
    });
  }

  let alive = true;
  async function refreshSummary() {
    try {
      summary = await ctx.api.get(`${API}/cluster`);
    } catch (e) {
      summary = null;
    }
    if (alive) schedule();
  }
  async function refreshCost() {
    costToday = await costSinceMidnight(ctx).catch(() => null);
    if (alive) schedule();
  }
  const schedule = onFrame(() => {
    if (alive) draw();
  });
  draw();
  refreshSummary();
  refreshCost();
  // The summary and the cost are aggregates the watch does not carry: refreshed when the jobs
  // or nodes change, the summary at most every 5 s, the cost (a read of every usage record
  // since midnight) at most every minute.
  let summaryAt = performance.now();
  let costAt = summaryAt;
  const onChange = () => {
    schedule();
    const now = performance.now();
    if (now - summaryAt > 5000) {
      summaryAt = now;
      refreshSummary();
    }
    if (now - costAt > 60000) {
      costAt = now;
      refreshCost();
    }
  };
  const offs = [ctx.jobs.subscribe(onChange), ctx.nodes.subscribe(onChange)];
  return () => {
    alive = false;
    offs.forEach((f) => f());
    if (chart) chart.destroy();
  };
}

/**
 * Dollars spent since local midnight: the usage records of attempts that ended today (their
 * part after midnight) and the running attempts up to now.
 * @param {import('./app.js').Ctx} ctx
 */
async function costSinceMidnight(ctx) {
  const midnight = new Date();
  midnight.setHours(0, 0, 0, 0);
  const since = midnight.getTime();
  const now = Date.now();
  const path = ctx.who.namespace ? `${API}/namespaces/${encodeURIComponent(ctx.who.namespace)}/usage` :
      `${API}/usage`;
  const usage = await ctx.api.get(`${path}?since=${since}`);
  let usd = 0;
  const rate = (/** @type {Record<string, number> | undefined} */ m) =>
    Object.values(m || {}).reduce((a, b) => a + b, 0);
  for (const u of usage.items || []) {
    const from = Math.max(u.startMs, since);
    const to = Math.min(u.endMs, now);
    if (to > from) usd += rate(u.usdPerHour) * (to - from) / 3.6e6;
  }
  for (const j of ctx.jobs.items.values()) {
    const s = j.status || {};
    const start = s.billedFromMs || s.attemptStartedMs || s.startedMs;
    if (!start || !s.usdPerHour || s.runEndedMs || ['Succeeded', 'Failed'].includes(s.phase)) continue;
    if (s.phase !== 'Running' && s.phase !== 'Scheduled') continue;
    usd += rate(s.usdPerHour) * (now - Math.max(start, since)) / 3.6e6;
  }
  return usd;
}
