// @ts-check
// Submit a job from YAML (or JSON): validated by the server (dryRun=All) or created; the
// validator's errors are shown at their lines.
import { ApiError } from './api.js';
import { h, clear } from './dom.js';
import { manifestErrors } from './model.js';

const EXAMPLE = `apiVersion: gpucloud/v1
kind: Job
metadata:
  name: hello
spec:
  tasks:
  - name: main
    replicas: 1
    command: [python3, examples/trainer/train.py, --steps, "20"]
    resources:
      gpu:
        count: 1
`;

/** @param {import('./app.js').Ctx} ctx @param {HTMLElement} main */
export function render(ctx, main) {
  const text = /** @type {HTMLTextAreaElement} */ (h('textarea', { id: 'manifest', spellcheck: 'false',
    'aria-describedby': 'manifest-errors' }));
  text.value = sessionStorage.getItem('gpucloud.draft') || EXAMPLE;
  const ns = /** @type {HTMLInputElement} */ (h('input', { id: 'submit-ns', value: ctx.who.namespace || 'default' }));
  const lines = h('ol', { class: 'lines', 'aria-label': 'Manifest lines' });
  const errors = h('ul', { class: 'errors', id: 'manifest-errors', 'aria-live': 'polite' });
  const result = h('p', { role: 'status' });
  const validate = h('button', { type: 'button', class: 'secondary' }, 'Validate');
  const submit = h('button', { type: 'submit' }, 'Submit');
  const form = h('form', { 'aria-label': 'Submit a job' },
    h('div', { class: 'filters' }, h('label', { for: 'submit-ns' }, 'Namespace'), ns),
    h('label', { for: 'manifest' }, 'Job manifest (YAML or JSON)'),
    h('div', { class: 'editor' }, text, lines),
    h('div', { class: 'actions' }, validate, submit), errors, result);
  main.append(h('h1', null, 'Submit a job'), form);

  /** @param {{line: number, text: string}[]} errs */
  function show(errs) {
    clear(errors);
    clear(lines);
    const bad = new Map(errs.filter((e) => e.line).map((e) => [e.line, e.text]));
    text.value.split('\n').forEach((l, i) => {
      const why = bad.get(i + 1);
      lines.append(h('li', { class: why ? 'error' : null, title: why || null }, l || ' '));
    });
    for (const e of errs) {
      const item = h('li', null, e.line ? `Line ${e.line}: ${e.text}` : e.text);
      if (e.line) {
        const go = h('button', { type: 'button', class: 'secondary' }, 'go to line');
        go.addEventListener('click', () => selectLine(e.line));
        item.append(' ', go);
      }
      errors.append(item);
    }
  }
  /** @param {number} n */
  function selectLine(n) {
    const all = text.value.split('\n');
    const start = all.slice(0, n - 1).reduce((a, l) => a + l.length + 1, 0);
    text.focus();
    text.setSelectionRange(start, start + (all[n - 1] || '').length);
  }
  /** @param {boolean} dry */
  async function send(dry) {
    result.textContent = '';
    sessionStorage.setItem('gpucloud.draft', text.value);
    const body = text.value;
    const json = body.trim().startsWith('{');
    try {
      const path = `${ctx.jobsPath(ns.value.trim())}${dry ? '?dryRun=All' : ''}`;
      const job = await ctx.api.call('POST', path, { body,
        contentType: json ? 'application/json' : 'application/yaml' });
      show([]);
      if (dry) {
        result.textContent = `Valid: job ${job.metadata?.name} would be created.`;
      } else {
        result.textContent = `Created job ${job.metadata?.namespace}/${job.metadata?.name}.`;
        sessionStorage.removeItem('gpucloud.draft');
        ctx.go(`#/job/${encodeURIComponent(job.metadata.namespace)}/${encodeURIComponent(job.metadata.name)}`);
      }
    } catch (e) {
      if (e instanceof ApiError && e.status === 422) {
        show(manifestErrors(e.message));
        result.textContent = 'The manifest is not valid: nothing was created.';
      } else {
        show([]);
        ctx.showError(e);
      }
    }
  }
  validate.addEventListener('click', () => send(true));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    send(false);
  });
  show([]);
}
