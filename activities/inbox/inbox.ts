import { Context } from '@temporalio/activity';
import type { Integrations } from '../../integrations/config.js';
import { secretsKeyring } from '../../services/platform/sealing.js';
import { wakeSequenceContacts } from '../../services/sequences/stops.js';
import { type Sql } from '../../db/sql.js';
import { MailboxNetwork, pollMailbox } from '../../services/inbox/mailbox-poll.js';

/** Activities of the inbox's workflows. */
export function createInboxActivities({
  sql,
  mailboxNetwork: network,
  integrations,
}: {
  sql: Sql;
  mailboxNetwork: MailboxNetwork;
  integrations: Pick<Integrations, 'secretsKeys'>;
}) {
  return {
    /** Replies and bounces it records wake their sequence contacts (sends re-check anyway). */
    pollMailbox: async ({ mailboxId }: { mailboxId: string }) =>
      pollMailbox(
        sql,
        mailboxId,
        async (workspaceId, emails) => {
          const { client, info } = Context.current();
          await wakeSequenceContacts({ sql, temporal: { client, taskQueue: info.taskQueue } }, workspaceId, { emails });
        },
        network,
        await secretsKeyring(sql, integrations),
      ),
  };
}
export type InboxActivities = ReturnType<typeof createInboxActivities>;
