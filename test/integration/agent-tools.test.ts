import { afterEach, describe, expect, it } from 'vitest';
import { agentSuppliersFrom } from '../../integrations/agent-tools/index.js';
import { httpWorkEmailSupplier } from '../../integrations/agent-tools/work-email.js';
import { connectedAccount } from '../support/pnet.js';
import { useTestStack, withKey } from '../support/test-stack.js';

// The API and the worker share this suppliers object, as in production; a test gives it an email finder.
const suppliers = agentSuppliersFrom({});
const { stack } = useTestStack({ agentSuppliers: () => suppliers });
afterEach(() => {
  suppliers.workEmail = null;
});

describe('agent tool availability', () => {
  it('refuses to switch on a tool nothing here supplies, and allows it once a supplier exists', async () => {
    const ws = await stack.createWorkspace('paid');
    const headers = withKey(ws.apiKey);
    const tools = async () => (await stack.app.inject({ method: 'GET', url: '/agent-tools/', headers })).json().tools;
    const switchTool = (key: string, enabled: boolean) =>
      stack.app.inject({ method: 'PATCH', url: `/agent-tools/${key}/`, headers, payload: { enabled } });
    expect(await tools()).toEqual([
      {
        key: 'find_work_email',
        available: false,
        enabled: false,
        unavailable_reason: expect.stringContaining('WORK_EMAIL_FINDER_URL'),
      },
      {
        key: 'read_pnet_profile',
        available: false,
        enabled: false,
        unavailable_reason: expect.stringContaining('connected'),
      },
    ]);
    const refused = await switchTool('read_pnet_profile', true);
    expect(refused.statusCode).toBe(409);
    expect(refused.json().detail).toMatch(/cannot be switched on/);
    expect((await tools())[1].enabled).toBe(false);

    await connectedAccount(stack, ws);
    const on = await switchTool('read_pnet_profile', true);
    expect(on.json()).toEqual({ key: 'read_pnet_profile', available: true, enabled: true, unavailable_reason: null });

    // The route reads the suppliers the runs use, not the process environment.
    process.env.WORK_EMAIL_FINDER_URL = 'http://127.0.0.1:9/finder';
    expect((await switchTool('find_work_email', true)).statusCode).toBe(409);
    delete process.env.WORK_EMAIL_FINDER_URL;
    suppliers.workEmail = httpWorkEmailSupplier('http://127.0.0.1:9/finder');
    expect((await switchTool('find_work_email', true)).json().enabled).toBe(true);
    // Switching off is always allowed; an unknown tool is 422.
    expect((await switchTool('find_work_email', false)).json().enabled).toBe(false);
    expect((await switchTool('teleport', true)).statusCode).toBe(422);
  });
});
