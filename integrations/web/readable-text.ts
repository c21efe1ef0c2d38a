/**
 * The text a person reads on a web page: the title, the meta description, and the body without
 * scripts, styles, navigation and other chrome, one block per line. A single pass with indexOf
 * instead of regular expressions over the whole page, so a hostile page (thousands of unclosed
 * tags) costs linear time.
 */

/** Elements whose content is never text to read. */
const dropped = new Set([
  'script',
  'style',
  'noscript',
  'template',
  'svg',
  'iframe',
  'canvas',
  'object',
  'nav',
  'footer',
  'aside',
  'form',
  'select',
  'button',
]);
/** Elements that start a new line. */
const blocks = new Set([
  'p',
  'div',
  'br',
  'li',
  'ul',
  'ol',
  'dl',
  'dt',
  'dd',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'tr',
  'table',
  'section',
  'article',
  'main',
  'header',
  'blockquote',
  'pre',
  'hr',
  'figure',
  'figcaption',
  'address',
  'details',
  'summary',
]);

const named: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
  ndash: '–',
  mdash: '—',
  hellip: '…',
  copy: '©',
  reg: '®',
  trade: '™',
  lsquo: '‘',
  rsquo: '’',
  ldquo: '“',
  rdquo: '”',
  bull: '•',
  middot: '·',
  euro: '€',
  pound: '£',
  laquo: '«',
  raquo: '»',
};

export function decodeEntities(text: string): string {
  return text.replace(/&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});/g, (entity, body: string) => {
    if (body.startsWith('#')) {
      const code = body[1] === 'x' || body[1] === 'X' ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10);
      return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : '';
    }
    return named[body.toLowerCase()] ?? entity;
  });
}

/** Where `</name` next appears from `from`, case ignored; -1 when never. */
function closingTag(html: string, name: string, from: number): number {
  const pattern = new RegExp(`</${name}`, 'gi');
  pattern.lastIndex = from;
  return pattern.exec(html)?.index ?? -1;
}

const tidy = (text: string) => decodeEntities(text).replace(/\s+/g, ' ').trim();

/** The value of one attribute in a tag's source (`<meta name="x" content="y">`). */
function attribute(tag: string, name: string): string | null {
  const match = new RegExp(`\\s${name}\\s*=\\s*("([^"]*)"|'([^']*)'|([^\\s>]+))`, 'i').exec(tag);
  return match ? (match[2] ?? match[3] ?? match[4] ?? '') : null;
}

export interface ReadablePage {
  title: string | null;
  description: string | null;
  text: string;
}

export function readableText(html: string): ReadablePage {
  let title: string | null = null;
  let description: string | null = null;
  const out: string[] = [];
  let i = 0;
  while (i < html.length) {
    const open = html.indexOf('<', i);
    if (open === -1) {
      out.push(html.slice(i));
      break;
    }
    out.push(html.slice(i, open));
    if (html.startsWith('<!--', open)) {
      const end = html.indexOf('-->', open + 4);
      if (end === -1) break;
      i = end + 3;
      continue;
    }
    const close = html.indexOf('>', open + 1);
    if (close === -1) break;
    const tag = html.slice(open, close + 1);
    i = close + 1;
    const name = /^<\/?\s*([a-zA-Z][a-zA-Z0-9-]*)/.exec(tag)?.[1]?.toLowerCase();
    if (!name) continue;
    const closing = tag[1] === '/';
    if (!closing && name === 'title' && title === null) {
      const end = closingTag(html, 'title', i);
      title = tidy(html.slice(i, end === -1 ? undefined : end)) || null;
      if (end === -1) break;
      i = end;
      continue;
    }
    if (!closing && name === 'meta') {
      const key = (attribute(tag, 'name') ?? attribute(tag, 'property'))?.toLowerCase();
      const content = attribute(tag, 'content');
      if (content && (key === 'description' || (key === 'og:description' && description === null)))
        description = tidy(content) || null;
      continue;
    }
    if (!closing && dropped.has(name) && !tag.endsWith('/>')) {
      const end = closingTag(html, name, i);
      if (end === -1) break;
      i = end;
      continue;
    }
    if (blocks.has(name)) out.push('\n');
    else if (name === 'td' || name === 'th') out.push('\t');
  }
  const text = decodeEntities(out.join(''))
    .split('\n')
    .map((line) => line.replace(/[ \t\u00a0\r\f\v]+/g, ' ').trim())
    .filter((line) => line !== '')
    .join('\n')
    .trim();
  return { title, description, text };
}
