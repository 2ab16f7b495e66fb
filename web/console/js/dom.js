// @ts-check
// A few DOM helpers. Text always goes in as text nodes, never as HTML, so nothing an API
// object holds can run as script in the page.

/**
 * @param {string} tag
 * @param {Record<string, any> | null} [attrs] attributes; on* are listeners, `hidden` and
 *     `disabled` are booleans
 * @param {...(Node | string | number | null | undefined | false)} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'hidden' || k === 'disabled' || k === 'checked' || k === 'selected') {
      /** @type {any} */ (el)[k] = Boolean(v);
    } else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, ...children);
  return el;
}

/** @param {Node} el @param {...(Node | string | number | null | undefined | false)} children */
export function append(el, ...children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }
}

/** @param {Node} el */
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
}

/** @param {number | undefined} ms */
export function ago(ms) {
  if (!ms) return '';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** @param {number} x @param {number} [digits] */
export const num = (x, digits = 1) =>
  Number.isInteger(x) ? String(x) : x.toFixed(digits);

/**
 * A table with a header row. @param {string} label @param {string[]} head
 * @param {(Node | string | number)[][]} rows @param {Set<number>} [numeric] numeric columns
 */
export function table(label, head, rows, numeric = new Set()) {
  return h('table', { 'aria-label': label },
    h('thead', null, h('tr', null, ...head.map((c, i) =>
      h('th', { scope: 'col', class: numeric.has(i) ? 'num' : null }, c)))),
    h('tbody', null, ...rows.map((r) => h('tr', null, ...r.map((c, i) =>
      h('td', { class: numeric.has(i) ? 'num' : null }, c))))));
}

/** @param {string} phase */
export const phaseBadge = (phase) => h('span', { class: `phase phase-${phase}` }, phase || '—');

/** A definition list. @param {[string, Node | string | number][]} pairs */
export const kv = (pairs) => h('dl', { class: 'kv' },
  ...pairs.flatMap(([k, v]) => [h('dt', null, k), h('dd', null, v)]));

/** A colour from blue (0: idle) to red (1: busy), for a GPU cell. @param {number} x */
export function heat(x) {
  const t = Math.max(0, Math.min(1, x));
  const hue = 210 - 210 * t;  // blue (idle) to red (hot)
  return `hsl(${hue}, 70%, ${85 - 35 * t}%)`;
}

/**
 * `fn`, called at most once per animation frame however often the returned function is: how
 * the pages coalesce bursts of watch events into one redraw. @param {() => void} fn
 */
export function onFrame(fn) {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      fn();
    });
  };
}

/** @type {Promise<any> | null} */
let chartLoading = null;
/**
 * Chart.js (Debian's, served as vendor/chart.min.js), loaded the first time a page draws a
 * chart rather than with every page: compiling it is the longest task of a first load.
 * @returns {Promise<any>} the Chart constructor
 */
export function loadChart() {
  if (!chartLoading) {
    chartLoading = new Promise((resolve, reject) => {
      const s = document.createElement('script');
      s.src = 'vendor/chart.min.js';
      s.onload = () => resolve(/** @type {any} */ (window).Chart);
      s.onerror = () => { chartLoading = null; reject(new Error('cannot load vendor/chart.min.js')); };
      document.head.appendChild(s);
    });
  }
  return chartLoading;
}
