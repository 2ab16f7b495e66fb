// @ts-check
// Nodes and GPUs: every GPU as a cell coloured by utilization or memory in use, with its health
// and risk, and a table of nodes. The node objects are followed by watch; the utilization
// samples (which heartbeats bring and the watch does not carry) are re-read every 15 s.
import { h, append, clear, ago, heat, num, onFrame } from './dom.js';

const METRICS = { utilization: 'Utilization', memory: 'Memory in use' };
const MAX_ROWS = 500;

/** @param {import('./app.js').Ctx} ctx @param {HTMLElement} main */
export function render(ctx, main) {
  let metric = 'utilization';
  const pick = /** @type {HTMLSelectElement} */ (h('select', { id: 'metric' },
    ...Object.entries(METRICS).map(([k, v]) => h('option', { value: k }, v))));
  pick.addEventListener('change', () => { metric = pick.value; draw(); });
  const grid = h('div', { class: 'grid', role: 'group', 'aria-label': 'GPUs, coloured by the chosen measure' });
  const stats = h('p', { class: 'muted', role: 'status' });
  const nodesTable = h('div');
  main.append(h('h1', null, 'Nodes and GPUs'),
    h('div', { class: 'filters' }, h('label', { for: 'metric' }, 'Colour by'), pick, stats),
    h('p', { class: 'legend' }, 'Blue: idle; red: busy. A red border: unhealthy; dashed: at risk.'),
    grid, h('h2', null, 'Nodes'), nodesTable);

  function draw() {
    clear(grid);
    const nodes = [...ctx.nodes.items.values()].sort((a, b) =>
      a.metadata.name < b.metadata.name ? -1 : 1);
    let gpus = 0;
    let unhealthy = 0;
    const frag = document.createDocumentFragment();
    for (const n of nodes) {
      for (const g of n.status?.gpus || []) {
        gpus++;
        if (g.healthy === false) unhealthy++;
        const value = metric === 'utilization' ? (g.utilization ?? 0) / 100 :
          g.memoryTotalMiB ? (g.memoryUsedMiB || 0) / g.memoryTotalMiB : 0;
        const label = `${n.metadata.name} GPU ${g.index} (${g.type}): ` +
          `${Math.round(value * 100)}% ${metric === 'utilization' ? 'utilized' : 'memory used'}` +
          `${g.healthy === false ? ', unhealthy' : ''}${g.atRisk ? ', at risk' : ''}`;
        // Out of the tab order (16,000 of them at 2,000 nodes): the table below has each node's
        // link for the keyboard.
        const cell = h('a', { href: `#/node/${encodeURIComponent(n.metadata.name)}`, tabindex: '-1',
          class: `gpu${g.healthy === false ? ' unhealthy' : ''}${g.atRisk ? ' atrisk' : ''}`,
          title: label, 'aria-label': label });
        cell.style.background = heat(value);
        frag.append(cell);
      }
    }
    grid.append(frag);
    stats.textContent = `${nodes.length} nodes, ${gpus} GPUs, ${unhealthy} unhealthy`;
    clear(nodesTable);
    const rows = nodes.slice(0, MAX_ROWS).map((n) => {
      const s = n.status || {};
      const gs = s.gpus || [];
      return h('tr', null,
        h('td', null, h('a', { href: `#/node/${encodeURIComponent(n.metadata.name)}` }, n.metadata.name)),
        h('td', { class: s.ready ? 'ok' : 'bad' }, s.ready ? 'Ready' : `NotReady${s.readyReason ? ` (${s.readyReason})` : ''}`),
        h('td', null, n.spec?.unschedulable ? 'cordoned' : ''),
        h('td', null, n.spec?.pool || ''),
        h('td', { class: 'num' }, gs.length),
        h('td', null, [...new Set(gs.map((/** @type {any} */ g) => g.type))].join(', ')),
        h('td', { class: 'num' }, s.gpuUsage?.measuredGpus ? `${num(s.gpuUsage.utilization)}%` : '—'),
        h('td', null, ago(s.lastHeartbeatMs)));
    });
    append(nodesTable, h('table', { 'aria-label': 'Nodes' },
      h('thead', null, h('tr', null, ...['Node', 'Ready', 'Scheduling', 'Pool', 'GPUs', 'Types',
        'Utilization', 'Last heartbeat'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, ...rows)),
    nodes.length > MAX_ROWS ? h('p', { class: 'muted' },
      `The first ${MAX_ROWS} of ${nodes.length} nodes; the grid above shows every GPU.`) : null);
  }
  const schedule = onFrame(draw);
  const off = ctx.nodes.subscribe(schedule);
  const timer = setInterval(() => ctx.nodes.refresh().catch(() => {}), 15000);
  draw();
  return () => {
    off();
    clearInterval(timer);
  };
}
