// @ts-check
// The console's shell: sign-in (the token lives in this tab's sessionStorage, never in a URL),
// the collections every page shares (jobs, nodes, queues: listed once, then followed by watch),
// and a router over the URL's #fragment. Each page is a module whose render(ctx, main, args)
// draws into `main` and returns its cleanup.
import { Api, API, ApiError, Informer } from './api.js';
import { clear, h } from './dom.js';

const TOKEN_KEY = 'gpucloud.token';

/** @typedef {{api: Api, who: any, jobs: Informer, nodes: Informer, queues: Informer,
 *    jobsPath: (ns?: string) => string, showError: (e: any) => void, announce: (m: string) => void,
 *    go: (hash: string) => void}} Ctx */

const pages = {
  overview: () => import('./overview.js'),
  jobs: () => import('./jobs.js'),
  job: () => import('./job.js'),
  nodes: () => import('./nodes.js'),
  node: () => import('./node.js'),
  queues: () => import('./queues.js'),
  submit: () => import('./submit.js'),
  sim: () => import('./sim.js'),
};

const main = /** @type {HTMLElement} */ (document.getElementById('main'));
const alertBox = /** @type {HTMLElement} */ (document.getElementById('alert'));
/** @type {Ctx | null} */
let ctx = null;
/** @type {(() => void) | null} */
let cleanup = null;

/** An API error as the user should read it: a 403 names the action the policies refused. */
function showError(/** @type {any} */ e) {
  if (!e) {
    alertBox.hidden = true;
    return;
  }
  const what = e instanceof ApiError && e.status === 403 ? 'Not allowed: ' :
      e instanceof ApiError ? `${e.reason || 'Error'} (${e.status}): ` : 'Error: ';
  alertBox.textContent = what + (e.message || String(e));
  alertBox.hidden = false;
}

function announce(/** @type {string} */ m) {
  const live = document.getElementById('live');
  if (live) live.textContent = m;
}

function signInPage(/** @type {string} */ message) {
  clear(main);
  const input = /** @type {HTMLInputElement} */ (h('input', {
    id: 'token', type: 'password', autocomplete: 'off', required: true,
    'aria-describedby': 'token-help',
  }));
  const form = h('form', { class: 'signin', 'aria-label': 'Sign in' },
    h('h1', null, 'Sign in to gpucloud'),
    h('label', { for: 'token' }, 'API token'),
    input,
    h('p', { id: 'token-help', class: 'muted' },
      'The token from your admin.config or from `gpuctl create token`. It is kept in this ',
      'tab only and sent to this server alone.'),
    message ? h('p', { class: 'bad', role: 'alert' }, message) : null,
    h('button', { type: 'submit' }, 'Sign in'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    signIn(input.value.trim());
  });
  main.appendChild(form);
  input.focus();
}

async function signIn(/** @type {string} */ token) {
  const api = new Api(token);
  let who;
  try {
    who = await api.get(`${API}/whoami`);
  } catch (e) {
    // A refused token is forgotten; a server that is down or restarting is not the token's fault.
    const refused = e instanceof ApiError && e.status === 401;
    if (refused) sessionStorage.removeItem(TOKEN_KEY);
    signInPage(refused ? 'That token is not valid.' :
        `Cannot reach the API: ${/** @type {any} */ (e).message}`);
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  const jobsPath = (ns = '') =>
    ns ? `${API}/namespaces/${encodeURIComponent(ns)}/jobs` :
    who.namespace ? `${API}/namespaces/${encodeURIComponent(who.namespace)}/jobs` : `${API}/jobs`;
  ctx = {
    api, who, jobsPath, showError, announce,
    jobs: new Informer(api, jobsPath()).start(),
    nodes: new Informer(api, `${API}/nodes`).start(),
    queues: new Informer(api, `${API}/queues`).start(),
    go: (hash) => { location.hash = hash; },
  };
  // For tests and benchmarks: the jobs are listed and followed from here on.
  ctx.jobs.listed.then(() => { document.body.dataset.jobsSynced = 'true'; });
  const whoEl = /** @type {HTMLElement} */ (document.getElementById('who'));
  whoEl.textContent = `${who.user}${who.namespace ? ` · ${who.namespace}` : ''}` +
      `${(who.policies || []).includes('gpucloud:admin') ? ' (administrator)' : ''}`;
  /** @type {HTMLElement} */ (document.getElementById('nav')).hidden = false;
  /** @type {HTMLElement} */ (document.getElementById('signout')).hidden = false;
  route();
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem('gpucloud.draft');  // a manifest may hold secrets
  if (cleanup) cleanup();
  cleanup = null;
  if (ctx) for (const inf of [ctx.jobs, ctx.nodes, ctx.queues]) inf.stop();
  delete document.body.dataset.jobsSynced;
  ctx = null;
  /** @type {HTMLElement} */ (document.getElementById('nav')).hidden = true;
  /** @type {HTMLElement} */ (document.getElementById('signout')).hidden = true;
  /** @type {HTMLElement} */ (document.getElementById('who')).textContent = '';
  showError(null);
  signInPage('You are signed out.');
}

let routing = 0;  // the newest route(): an older one that finishes late draws nothing

async function route() {
  if (!ctx) return;
  const mine = ++routing;
  const [path, search] = location.hash.replace(/^#\/?/, '').split('?');
  const parts = (path || 'overview').split('/').map(decodeURIComponent);
  const name = /** @type {keyof typeof pages} */ (parts[0] in pages ? parts[0] : 'overview');
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.getAttribute('href') === `#/${name === 'job' ? 'jobs' : name === 'node' ? 'nodes' : name}`) {
      a.setAttribute('aria-current', 'page');
    } else a.removeAttribute('aria-current');
  }
  if (cleanup) cleanup();
  cleanup = null;
  showError(null);
  clear(main);
  const page = await pages[name]();
  if (!ctx || mine !== routing) return;
  cleanup = page.render(ctx, main, parts.slice(1), new URLSearchParams(search || '')) || null;
  document.title = `${name} · gpucloud console`;
  main.focus({ preventScroll: true });  // keyboard users start at the new page
}

window.addEventListener('hashchange', () => route());
/** @type {HTMLElement} */ (document.getElementById('signout')).addEventListener('click', signOut);
const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved) signIn(saved);
else signInPage('');
