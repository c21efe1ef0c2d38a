/** A file that cannot be read as what it claims to be: the API answers 422 with this message. */
export class ExtractionRefused extends Error {
  override name = 'ExtractionRefused';
}
