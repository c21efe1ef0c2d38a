/**
 * The consent page of connected AI apps, rendered on the server: which app asks (its name, brand,
 * recognised or unverified), where approving sends the person (the redirect host, large, with a
 * warning when it is this computer), and, once the person is signed in, their workspaces (with
 * whether `write` takes effect there) and the access choice. The page's script uses the same JSON
 * routes an API client would (read the request, approve, deny) with the person's bearer token.
 *
 * Sign-in: the token of the workspace's identity provider. On the embedded stack, the development
 * sign-in is the access token the operator command line prints (`create-workspace`, `add-member`),
 * pasted once; it is kept in this tab's sessionStorage only.
 */
import type { Brand } from '../../domain/connected-apps/connected-apps.js';

const escape = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

const brandLabels: Record<Brand, string> = {
  assistant_a: 'Assistant A',
  assistant_b: 'Assistant B',
  other: 'Other app',
};

type PageInput =
  | { kind: 'refused'; message: string }
  | {
      kind: 'ask';
      requestId: string;
      app: { app_name: string; brand: Brand; recognised: boolean; is_local: boolean; redirect_host: string };
    };

const style = `
  body { font: 16px/1.45 system-ui, sans-serif; max-width: 36rem; margin: 2rem auto; padding: 0 1rem; color: #1b1b1b; }
  h1 { font-size: 1.4rem; } .host { font: 700 1.5rem/1.2 ui-monospace, monospace; padding: .5rem .75rem; background: #f3f3f3; border-radius: 6px; display: inline-block; }
  .badge { font-size: .8rem; padding: .1rem .45rem; border-radius: 999px; border: 1px solid #888; margin-left: .35rem; }
  .unverified { border-color: #b35c00; color: #b35c00; } .recognised { border-color: #17703a; color: #17703a; }
  .warn { background: #fff4e0; border-left: 4px solid #b35c00; padding: .6rem .8rem; margin: 1rem 0; }
  fieldset { border: 1px solid #ddd; border-radius: 6px; margin: 1rem 0; } .note { color: #666; font-size: .9rem; }
  button { font-size: 1rem; padding: .5rem 1rem; margin-right: .5rem; } .error { color: #a00; }
`;

export function consentPage(input: PageInput): string {
  if (input.kind === 'refused') {
    return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Cannot connect the app</title><style>${style}</style></head>
<body><h1>This app cannot connect</h1><p id="refusal" class="error">${escape(input.message)}</p></body></html>`;
  }
  const { app, requestId } = input;
  const data = JSON.stringify({ requestId }).replace(/</g, '\\u003c');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Connect ${escape(app.app_name)} to your workspace</title><style>${style}</style></head>
<body>
<h1><span id="app-name">${escape(app.app_name)}</span> wants to use your workspace
  <span id="brand" class="badge">${escape(brandLabels[app.brand])}</span>
  ${app.recognised ? '<span id="verification" class="badge recognised">Recognised</span>' : '<span id="verification" class="badge unverified">Unverified</span>'}</h1>
${app.recognised ? '' : '<p class="note">This service does not know this app: its name is what the app says about itself.</p>'}
<p>Approving sends you, and a code that lets the app act in the workspace, to:</p>
<p><span id="redirect-host" class="host">${escape(app.redirect_host)}</span></p>
${app.is_local ? '<p id="local-warning" class="warn">This address is on <strong>this computer</strong> (a local-only redirect). Approve only if you started this app yourself on this machine.</p>' : ''}
<section id="sign-in" hidden>
  <h2>Sign in</h2>
  <p class="note">Paste the access token your workspace's identity provider gave you. On a development stack, use the <code>access_token</code> that <code>npm run admin -- create-workspace</code> or <code>add-member</code> printed.</p>
  <input id="token" type="password" autocomplete="off" size="40" aria-label="Access token"> <button id="sign-in-button" type="button">Sign in</button>
</section>
<section id="choose" hidden>
  <fieldset><legend>Workspace</legend><div id="workspaces"></div></fieldset>
  <fieldset><legend>Access</legend>
    <label><input type="radio" name="access" value="read" checked> Read: look things up</label><br>
    <label><input type="radio" name="access" value="write"> Write: make changes (spends credits where an operation does)</label>
    <p id="plan-note" class="note" hidden>This workspace is not on the paid plan: the app can only read there, whatever you choose.</p>
  </fieldset>
  <button id="approve" type="button">Approve</button><button id="deny" type="button">Deny</button>
</section>
<p id="message" class="error" role="alert"></p>
<script>
(() => {
  const { requestId } = ${data};
  const base = '/connected-apps/consent-requests/' + encodeURIComponent(requestId) + '/';
  const $ = (id) => document.getElementById(id);
  const say = (text) => { $('message').textContent = text; };
  const token = () => sessionStorage.getItem('workspace_access_token');
  async function call(path, method, body) {
    const res = await fetch(base + path, {
      method, headers: { authorization: 'Bearer ' + token(), ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const answer = await res.json().catch(() => ({}));
    if (res.status === 401) { sessionStorage.removeItem('workspace_access_token'); show(); }
    if (!res.ok) throw new Error(answer.detail || ('The service answered ' + res.status));
    return answer;
  }
  function planNote() {
    const picked = document.querySelector('input[name=workspace]:checked');
    $('plan-note').hidden = !picked || picked.dataset.canWrite === 'true';
  }
  async function show() {
    if (!token()) { $('sign-in').hidden = false; $('choose').hidden = true; return; }
    $('sign-in').hidden = true;
    try {
      const request = await call('', 'GET');
      const list = $('workspaces');
      list.textContent = '';
      request.workspaces.forEach((w, i) => {
        const label = document.createElement('label');
        const input = Object.assign(document.createElement('input'), { type: 'radio', name: 'workspace', value: w.workspace_id, checked: i === 0 });
        input.dataset.canWrite = String(w.can_write);
        input.addEventListener('change', planNote);
        label.append(input, ' ' + w.name + (w.can_write ? '' : ' (read only: not on the paid plan)'));
        list.append(label, document.createElement('br'));
      });
      planNote();
      $('choose').hidden = false;
    } catch (error) { say(error.message); }
  }
  $('sign-in-button').addEventListener('click', () => { sessionStorage.setItem('workspace_access_token', $('token').value.trim()); say(''); show(); });
  $('approve').addEventListener('click', async () => {
    const workspace = document.querySelector('input[name=workspace]:checked');
    if (!workspace) return say('Pick a workspace.');
    const access = document.querySelector('input[name=access]:checked').value;
    try { window.location.assign((await call('approve/', 'POST', { workspace_id: workspace.value, access })).redirect_url); } catch (error) { say(error.message); }
  });
  $('deny').addEventListener('click', async () => {
    try { window.location.assign((await call('deny/', 'POST')).redirect_url); } catch (error) { say(error.message); }
  });
  show();
})();
</script>
</body></html>`;
}
