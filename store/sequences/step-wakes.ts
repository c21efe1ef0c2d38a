/** Which sequence contacts a settled pnet step concerns (their workflows are woken). */
import type { Db } from '../../db/sql.js';

/** The active or failed contacts of the given browser steps of sequences, by contact key. */
export async function contactsOfSteps(db: Db, stepIds: string[]): Promise<{ id: string; sequence_id: string }[]> {
  return db<{ id: string; sequence_id: string }[]>`
    select c.id, c.sequence_id from browser_steps s
    join sequence_contacts c on c.workspace_id = s.workspace_id and c.contact_key = s.contact_key
    where s.id in ${db(stepIds)} and s.sequence_id is not null and c.status in ('active', 'failed')`;
}
