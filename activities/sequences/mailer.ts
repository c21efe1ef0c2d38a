/**
 * The contact workflow's sending activity (workflows/sequences/sequence-contact.ts): a door to
 * services/sequences/mailer-send.ts, which claims the send in Postgres before SMTP so that an email
 * goes out at most once.
 */
import type { Sql } from '../../db/sql.js';
import type { Mailer } from '../../integrations/mailer.js';
import { sendSequenceEmail } from '../../services/sequences/mailer-send.js';

export type { SendOutcome } from '../../services/sequences/mailer-send.js';

export interface MailerActivityDeps {
  sql: Sql;
  mailer: Mailer | null;
  /** The API's public address, for the open-tracking pixel; emails carry no pixel without it. */
  publicBaseUrl?: string | undefined;
}

export function createMailerActivities(deps: MailerActivityDeps) {
  return {
    sendSequenceEmail: (input: { sendId: string }) => sendSequenceEmail(deps, input),
  };
}
export type MailerActivities = ReturnType<typeof createMailerActivities>;
