/**
 * The integration files share a process (vitest `isolate: false`: modules load once per fork), so a
 * file that sets process.env for its stack (SMTP_URL, a rate limit) gets it back after its tests
 * instead of handing its settings to the next file.
 */
import { afterAll } from 'vitest';

const before = { ...process.env };
afterAll(() => {
  for (const name of Object.keys(process.env)) if (!(name in before)) delete process.env[name];
  Object.assign(process.env, before);
});
