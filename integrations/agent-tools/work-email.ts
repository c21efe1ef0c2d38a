/**
 * Finding a person's work email behind a small interface: an email-finder service over HTTP JSON
 * (WORK_EMAIL_FINDER_URL, the supplier the agent-tools availability rule checks). It is POSTed
 * `{full_name, domain}` and answers `{email, confidence}` (email null when none was found).
 */
import { postJson, ToolFailure } from './http-json.js';

export interface WorkEmailAnswer {
  email: string | null;
  confidence: string | null;
}

export interface WorkEmailSupplier {
  find(input: { full_name: string; domain: string }, signal: AbortSignal): Promise<WorkEmailAnswer>;
}

export function httpWorkEmailSupplier(url: string, timeoutSeconds = 20): WorkEmailSupplier {
  return {
    async find(input, signal) {
      const { body } = await postJson(url, input, { signal, timeoutSeconds });
      if (body === null || typeof body !== 'object')
        throw new ToolFailure('The email finder answered without an object.', false);
      const { email, confidence } = body as { email?: unknown; confidence?: unknown };
      return {
        email: typeof email === 'string' && email ? email : null,
        confidence: typeof confidence === 'string' ? confidence : null,
      };
    },
  };
}
