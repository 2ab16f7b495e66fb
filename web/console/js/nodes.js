// @ts-check
// Nodes and GPUs: every GPU as a cell coloured by utilization or memory in use, with its health
// and risk, and a table of nodes. The node objects are followed by watch; the utilization
// samples (which heartbeats bring and the watch does not carry) are re-read every 15 s.
import { h, append, clear, ago, heat, num, onFrame } from './dom.js';

const METRICS = { utilization: 'Utilization', memory: 'Memory in use' };
const MAX_ROWS = 200;

/** @param {import('./app.js').Ctx} ctx @param {HTMLElement} main */
export function render(ctx, main) {
  let metric = 'utilization';
  const pick = /** @type {HTMLSelectElement} */ (h('select', { id: 'metric' },
    ...Object.entries(METRICS).map(([k, v]) => h('option', { value: k }, v))));
  pick.addEventListener('change', () => { metric = pick.value; draw(); });
  const canvas = /** @type {HTMLCanvasElement} */ (h('canvas', { role: 'img', class: 'gpu-grid',
    'aria-label': 'Every GPU as a cell coloured by the chosen measure; the table below lists the nodes' }));
  const grid = h('div', { class: 'grid' }, canvas);
  const stats = h('p', { class: 'muted', role: 'status' });
  const nodesTable = h('div');
  const find = /** @type {HTMLInputElement} */ (h('input', { id: 'find-node', type: 'search' }));
  find.addEventListener('input', () => draw());
  main.append(h('h1', null, 'Nodes and GPUs'),
    h('div', { class: 'filters' }, h('label', { for: 'metric' }, 'Colour by'), pick, stats),
    h('p', { class: 'legend' }, 'Blue: idle; red: busy. A red border: unhealthy; dashed: at risk.'),
    grid, h('h2', null, 'Nodes'),
    h('div', { class: 'filters' }, h('label', { for: 'find-node' }, 'Find a node'), find), nodesTable);

  /** @type {{node: string, g: any, value: number}[]} the grid's cells in drawing order */
  let cellInfo = [];
  let drawn = '';  // what the canvas shows (width, measure, every cell's colour and health)
  const colours = Array.from({ length: 101 }, (_, i) => heat(i / 100));

  // The grid is one canvas: 16,000 cells (2,000 nodes) draw in a few milliseconds, where as
  // many elements took a 300 ms task to build; it is redrawn only when a cell changed. The
  // pointer's cell is named in the canvas' title and a click opens its node; keyboard users
  // reach each node from the table below.
  function drawGrid(/** @type {any[]} */ nodes) {
    const pitch = 16;  // a 14 px cell and a 2 px gap
    const width = Math.max(pitch, grid.clientWidth - 4 || 1200);
    const cols = Math.max(1, Math.floor(width / pitch));
    const info = [];
    const sig = [cols, metric];
    for (const n of nodes) {
      for (const g of n.status?.gpus || []) {
        const value = metric === 'utilization' ? (g.utilization ?? 0) / 100 :
          g.memoryTotalMiB ? (g.memoryUsedMiB || 0) / g.memoryTotalMiB : 0;
        const level = Math.max(0, Math.min(100, Math.round(value * 100)));
        info.push({ node: n.metadata.name, g, value: level });
        sig.push(level * 4 + (g.healthy === false ? 2 : 0) + (g.atRisk ? 1 : 0));
      }
    }
    cellInfo = info;
    const now = sig.join(',');
    if (now === drawn) return;
    drawn = now;
    const rows = Math.ceil(info.length / cols);
    const ratio = window.devicePixelRatio || 1;
    canvas.width = cols * pitch * ratio;
    canvas.height = Math.max(1, rows * pitch * ratio);
    canvas.style.width = `${cols * pitch}px`;
    canvas.style.height = `${rows * pitch}px`;
    const c = canvas.getContext('2d');
    if (!c) return;
    c.scale(ratio, ratio);
    c.strokeStyle = '#6a737d';
    c.lineWidth = 1;
    info.forEach(({ value }, i) => {  // fills and plain borders, then the marked ones
      const x = (i % cols) * pitch + 1;
      const y = Math.floor(i / cols) * pitch + 1;
      c.fillStyle = colours[value];
      c.fillRect(x, y, 14, 14);
      c.strokeRect(x + 0.5, y + 0.5, 13, 13);
    });
    c.lineWidth = 2;
    info.forEach(({ g }, i) => {
      if (g.healthy !== false && !g.atRisk) return;
      c.setLineDash(g.healthy === false ? [] : [3, 2]);
      c.strokeStyle = g.healthy === false ? '#b3261e' : '#8a5a00';
      c.strokeRect((i % cols) * pitch + 2, Math.floor(i / cols) * pitch + 2, 12, 12);
    });
    canvas.dataset.cells = String(info.length);
    canvas.dataset.cols = String(cols);
  }
  /** @param {{node: string, g: any, value: number}} cell */
  const labelOf = (cell) => `${cell.node} GPU ${cell.g.index} (${cell.g.type}): ${cell.value}% ` +
    `${metric === 'utilization' ? 'utilized' : 'memory used'}` +
    `${cell.g.healthy === false ? ', unhealthy' : ''}${cell.g.atRisk ? ', at risk' : ''}`;
  /** The cell under a pointer event, or null. @param {MouseEvent} ev */
  function cellAt(ev) {
    const r = canvas.getBoundingClientRect();
    const col = Math.floor((ev.clientX - r.left) / 16);
    const row = Math.floor((ev.clientY - r.top) / 16);
    const cols = Number(canvas.dataset.cols || 1);
    if (col < 0 || col >= cols) return null;
    return cellInfo[row * cols + col] || null;
  }
  canvas.addEventListener('mousemove', (ev) => {
    const cell = cellAt(ev);
    canvas.title = cell ? labelOf(cell) : '';
  });
  canvas.addEventListener('click', (ev) => {
    const cell = cellAt(ev);
    if (cell) ctx.go(`#/node/${encodeURIComponent(cell.node)}`);
  });

  function draw() {
    const nodes = [...ctx.nodes.items.values()].sort((a, b) =>
      a.metadata.name < b.metadata.name ? -1 : 1);
    let gpus = 0;
    let unhealthy = 0;
    for (const n of nodes) {
      for (const g of n.status?.gpus || []) {
        gpus++;
        if (g.healthy === false) unhealthy++;
      }
    }
    drawGrid(nodes);
    stats.textContent = `${nodes.length} nodes, ${gpus} GPUs, ${unhealthy} unhealthy`;
    clear(nodesTable);
    const wanted = find.value.trim();
    const listed = wanted ? nodes.filter((n) => n.metadata.name.includes(wanted)) : nodes;
    const rows = listed.slice(0, MAX_ROWS).map((n) => {
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
    listed.length > MAX_ROWS ? h('p', { class: 'muted' },
      `The first ${MAX_ROWS} of ${listed.length} nodes: find a node by name for the others.`) : null);
  }
  const schedule = onFrame(draw);
  const off = ctx.nodes.subscribe(schedule);
  const timer = setInterval(() => ctx.nodes.refresh(500).catch(() => {}), 15000);
  draw();
  return () => {
    off();
    clearInterval(timer);
  };
}
