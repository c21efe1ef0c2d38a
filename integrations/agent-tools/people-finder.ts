/**
 * Finding people at a company behind a small interface: a people-search service over HTTP JSON
 * (PEOPLE_FINDER_URL). It is POSTed `{company, title}` and answers `{people: [{name, title, profile_url}]}`.
 */
import { postJson, ToolFailure } from './http-json.js';
import { textOf } from '../../domain/shared/text.js';

export interface Person {
  name: string;
  title: string | null;
  profile_url: string | null;
}

export interface PeopleFinderSupplier {
  find(input: { company: string; title: string | null }, signal: AbortSignal): Promise<Person[]>;
}

export function httpPeopleFinderSupplier(url: string, timeoutSeconds = 20): PeopleFinderSupplier {
  return {
    async find(input, signal) {
      const { body } = await postJson(url, input, { signal, timeoutSeconds });
      const people = (body as { people?: unknown })?.people;
      if (!Array.isArray(people)) throw new ToolFailure('The people finder answered without a people list.', false);
      return people.slice(0, 25).map((p: { name?: unknown; title?: unknown; profile_url?: unknown }) => ({
        name: textOf(p.name),
        title: typeof p.title === 'string' ? p.title : null,
        profile_url: typeof p.profile_url === 'string' ? p.profile_url : null,
      }));
    },
  };
}
