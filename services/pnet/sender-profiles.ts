/** A sender profile's pnet account after a change (operationIds createSenderProfile, updatePnetSettings). */
import { accountOfSenderProfile } from '../../store/pnet/accounts.js';
import type { ServiceDeps } from '../deps.js';
import { signalSenderAccount } from './browser-step-client.js';

/** The account's own workflow starts with its profile and re-reads its settings on a change. */
export async function wakeSenderAccount({ sql, temporal }: Pick<ServiceDeps, 'sql' | 'temporal'>, profileId: string) {
  const account = await accountOfSenderProfile(sql, profileId);
  await signalSenderAccount(temporal.client, temporal.taskQueue, account!);
}
