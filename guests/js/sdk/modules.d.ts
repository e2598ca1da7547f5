// build.sh bundles JSON files as text (esbuild's text loader), so that a
// provider returns its schema as written.
declare module '*.json' {
  const text: string;
  export default text;
}
