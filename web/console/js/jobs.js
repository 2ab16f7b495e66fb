// @ts-check
// Jobs: every job the identity may list, live, in a virtualized table (only the rows on screen
// are in the DOM, so 20,000 jobs scroll as fast as 20), filtered by phase, queue, namespace and
// name in the tab, and by a label selector on the server (its own list and watch).
import { Informer } from './api.js';
import { h, clear, ago, num, onFrame, phaseBadge } from './dom.js';
import { filterJobs, gpusOf } from './model.js';

const ROW = 30;  // px, as .scroller tr.row in app.css
const PHASES = ['', 'Pending', 'Scheduled', 'Running', 'Succeeded', 'Failed', 'Cancelled',
  'Preempting', 'Restarting', 'Cancelling', 'Stopping'];

/** @param {import('./app.js').Ctx} ctx @param {HTMLElement} main @param {string[]} _args
 *  @param {URLSearchParams} query */
export function render(ctx, main, _args, query) {
  const f = { phase: query.get('phase') || '', queue: query.get('queue') || '',
    namespace: query.get('namespace') || '', text: '' };
  let informer = ctx.jobs;
  /** @type {Informer | null} */
  let own = null;
  const sel = (/** @type {string} */ id, /** @type {string} */ label, /** @type {string[]} */ opts,
    /** @type {string} */ value, /** @type {(v: string) => void} */ set) => {
    const s = /** @type {HTMLSelectElement} */ (h('select', { id },
      ...opts.map((o) => h('option', { value: o, selected: o === value }, o || 'any'))));
    s.addEventListener('change', () => { set(s.value); refilter(); });
    return [h('label', { for: id }, label), s];
  };
  const queueNames = ['', ...[...ctx.queues.items.keys()].sort()];
  const nameInput = /** @type {HTMLInputElement} */ (h('input', { id: 'f-name', type: 'search' }));
  nameInput.addEventListener('input', () => { f.text = nameInput.value.trim(); refilter(); });
  const nsInput = /** @type {HTMLInputElement} */ (h('input', { id: 'f-ns', type: 'search',
    value: f.namespace, hidden: Boolean(ctx.who.namespace) }));
  nsInput.addEventListener('change', () => { f.namespace = nsInput.value.trim(); refilter(); });
  const selector = /** @type {HTMLInputElement} */ (h('input', { id: 'f-labels', type: 'search',
    placeholder: 'team=nlp,tier!=dev' }));
  selector.addEventListener('change', () => useSelector(selector.value.trim()));
  const count = h('span', { class: 'muted', id: 'jobs-count' });
  const tbody = h('tbody');
  const scroller = h('div', { class: 'scroller', tabindex: '0', role: 'region',
    'aria-label': 'Jobs table (scrollable)' },
    h('table', { 'aria-label': 'Jobs' },
      h('thead', null, h('tr', null, ...['Name', 'Namespace', 'Queue', 'Phase', 'GPUs',
        'Attempt', 'Age', 'Message'].map((c) => h('th', { scope: 'col' }, c)))),
      tbody));
  main.append(h('h1', null, 'Jobs'),
    h('div', { class: 'filters', role: 'search', 'aria-label': 'Filter jobs' },
      ...sel('f-phase', 'Phase', PHASES, f.phase, (v) => { f.phase = v; }),
      ...sel('f-queue', 'Queue', queueNames.includes(f.queue) ? queueNames : [...queueNames, f.queue],
        f.queue, (v) => { f.queue = v; }),
      ctx.who.namespace ? null : h('label', { for: 'f-ns' }, 'Namespace'), nsInput,
      h('label', { for: 'f-name' }, 'Name'), nameInput,
      h('label', { for: 'f-labels' }, 'Labels'), selector,
      h('a', { href: '#/submit' }, 'Submit a job'), count),
    scroller);

  /** @type {any[]} */
  let rows = [];
  function refilter() {
    rows = filterJobs(informer.items.values(), f);
    count.textContent = informer.error ? '' : informer.synced ? `${rows.length} jobs` :
      `${rows.length} jobs, ${informer.remaining ? `${informer.remaining} more ` : ''}loading…`;
    if (informer.error) ctx.showError(informer.error);
    draw();
  }
  const draw = onFrame(paint);
  function paint() {
    // The focused job link survives the repaint (rows are rebuilt).
    const focused = /** @type {HTMLElement | null} */ (document.activeElement?.closest?.('tr[data-job]') || null);
    const focusKey = focused && tbody.contains(focused) ? focused.dataset.job : null;
    const first = Math.max(0, Math.floor(scroller.scrollTop / ROW) - 10);
    const visible = Math.ceil((scroller.clientHeight || 600) / ROW) + 20;
    const last = Math.min(rows.length, first + visible);
    clear(tbody);
    const top = h('tr', { 'aria-hidden': 'true' });
    top.style.height = `${first * ROW}px`;
    tbody.append(top);
    for (let i = first; i < last; i++) tbody.append(row(rows[i]));
    const bottom = h('tr', { 'aria-hidden': 'true' });
    bottom.style.height = `${(rows.length - last) * ROW}px`;
    tbody.append(bottom);
    if (focusKey) {
      /** @type {HTMLElement | null} */ (tbody.querySelector(`tr[data-job="${CSS.escape(focusKey)}"] a`))
        ?.focus({ preventScroll: true });
    }
  }
  /** @param {any} j */
  function row(j) {
    const s = j.status || {};
    const ns = j.metadata.namespace;
    return h('tr', { class: 'row', 'data-job': `${ns}/${j.metadata.name}` },
      h('td', null, h('a', { href: `#/job/${encodeURIComponent(ns)}/${encodeURIComponent(j.metadata.name)}` },
        j.metadata.name)),
      h('td', null, ns), h('td', null, j.spec?.queue || 'default'),
      h('td', null, phaseBadge(s.phase || 'Pending')),
      h('td', { class: 'num' }, num(gpusOf(j))),
      h('td', { class: 'num' }, `${s.attempt || 0}${s.restarts ? ` (${s.restarts} restarts)` : ''}`),
      h('td', null, ago(s.submittedMs)),
      h('td', null, (s.message || '').slice(0, 120)));
  }
  /** @param {string} labels */
  function useSelector(labels) {
    if (own) own.stop();
    own = null;
    unsubscribe();
    informer = ctx.jobs;
    if (labels) {
      const base = ctx.jobsPath(ctx.who.namespace || undefined);
      // One page: with a selector the server reads every job for each page anyway.
      own = new Informer(ctx.api, `${base}?labelSelector=${encodeURIComponent(labels)}`,
        { pageSize: 1000000 }).start();
      informer = own;
    }
    unsubscribe = informer.subscribe(refilter);
    refilter();
  }
  let unsubscribe = informer.subscribe(refilter);
  scroller.addEventListener('scroll', draw, { passive: true });
  refilter();
  return () => {
    unsubscribe();
    if (own) own.stop();
  };
}
