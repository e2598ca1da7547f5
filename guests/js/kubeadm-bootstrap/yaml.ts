// A YAML writer for the cloud-config, byte for byte the Rust provider's
// (guests/kubeadm-bootstrap/src/yaml.rs). Every string is double-quoted
// unless it is a multi-line block that reads back unchanged.

/** A string, a list, a mapping (in order), or YAML documents. */
export type Node = string | Node[] | Mapping | Documents;

export class Mapping {
  readonly entries: [string, Node][];
  constructor(entries: [string, Node][]) {
    this.entries = entries;
  }
}

/** YAML documents joined by `---`, written as a block string where they are a value. */
export class Documents {
  readonly documents: Node[];
  constructor(documents: Node[]) {
    this.documents = documents;
  }
}

export const map = (entries: [string, Node][]) => new Mapping(entries);

/** `node` as the body of a YAML document, ending in a newline. */
export function write(node: Node): string {
  const out: string[] = [];
  writeAt(out, node, 0);
  return out.join('');
}

const pad = (indent: number) => ' '.repeat(indent);
const isEmpty = (node: Mapping | Node[]) => (node instanceof Mapping ? node.entries : node).length === 0;

function writeAt(out: string[], node: Node, indent: number) {
  if (typeof node === 'string') {
    out.push(pad(indent), quote(node), '\n');
  } else if (node instanceof Documents) {
    node.documents.forEach((document, i) => {
      if (i > 0) out.push(pad(indent), '---\n');
      writeAt(out, document, indent);
    });
  } else if (isEmpty(node)) {
    out.push(pad(indent), node instanceof Mapping ? '{}\n' : '[]\n');
  } else if (node instanceof Mapping) {
    writeMap(out, node.entries, indent, false);
  } else {
    writeList(out, node, indent);
  }
}

/** With `onDashLine` the first entry goes where a list item's `- ` left off. */
function writeMap(out: string[], entries: [string, Node][], indent: number, onDashLine: boolean) {
  entries.forEach(([k, value], i) => {
    if (i > 0 || !onDashLine) out.push(pad(indent));
    out.push(key(k), ':');
    writeValue(out, value, indent);
  });
}

function writeList(out: string[], items: Node[], indent: number) {
  for (const item of items) {
    out.push(pad(indent));
    if (item instanceof Mapping && !isEmpty(item)) {
      out.push('- ');
      writeMap(out, item.entries, indent + 2, true);
    } else {
      out.push('-');
      writeValue(out, item, indent);
    }
  }
}

/** What follows `key:` or `-`, with the line break. */
function writeValue(out: string[], value: Node, indent: number) {
  if (typeof value === 'string' && blockSafe(value)) {
    out.push(' |\n');
    for (const line of value.slice(0, -1).split('\n')) {
      if (line !== '') out.push(pad(indent + 2), line);
      out.push('\n');
    }
  } else if (typeof value === 'string') {
    out.push(' ', quote(value), '\n');
  } else if (value instanceof Documents && value.documents.length === 0) {
    out.push(' ""\n');
  } else if (value instanceof Documents) {
    // Every line written is printable, none blank or indented, and the last
    // ends in one line break: what blockSafe checks of a string.
    out.push(' |\n');
    writeAt(out, value, indent + 2);
  } else if (isEmpty(value)) {
    out.push(value instanceof Mapping ? ' {}\n' : ' []\n');
  } else if (value instanceof Mapping) {
    out.push('\n');
    writeMap(out, value.entries, indent + 2, false);
  } else {
    out.push('\n');
    writeList(out, value, indent + 2);
  }
}

/** YAML's printable set (YAML 1.2 §5.1) less NEL, which some parsers take for a line break. */
function printable(code: number): boolean {
  return (
    ((code >= 0x20 && code <= 0x7e) || (code >= 0xa0 && code <= 0xd7ff) || (code >= 0xe000 && code <= 0xfffd) || code >= 0x10000) &&
    code !== 0xfeff
  );
}

/** A literal block (`|`), clipped: several lines, one final line break, no leading blank, nothing to escape. */
function blockSafe(s: string): boolean {
  return (
    s.includes('\n') &&
    s.endsWith('\n') &&
    !s.endsWith('\n\n') &&
    !/^[ \t\n]/.test(s) &&
    [...s].every((c) => c === '\n' || printable(c.codePointAt(0)!))
  );
}

const ESCAPES = new Map([['"', '\\"'], ['\\', '\\\\'], ['\n', '\\n'], ['\t', '\\t'], ['\r', '\\r']]);

/** A double-quoted scalar; JSON-style escapes, which YAML shares. */
function quote(s: string): string {
  let out = '"';
  for (const c of s) {
    const code = c.codePointAt(0)!;
    const escape = ESCAPES.get(c);
    if (escape !== undefined) out += escape;
    else if (printable(code)) out += c;
    else if (code <= 0xffff) out += `\\u${code.toString(16).padStart(4, '0')}`;
    else out += `\\U${code.toString(16).padStart(8, '0')}`;
  }
  return `${out}"`;
}

const RESERVED = new Set(['y', 'n', 'yes', 'no', 'on', 'off', 'true', 'false', 'null', '~', '<<', '=']);

/** A mapping key, plain when it cannot be read as anything but a string. */
function key(k: string): string {
  return /^[A-Za-z_][A-Za-z0-9_\-./]*$/.test(k) && !RESERVED.has(k.toLowerCase()) ? k : quote(k);
}
