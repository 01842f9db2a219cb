var preparedWrappers = new WeakMap();
function prepareWrappers(functions) {
  if (typeof WebAssembly.Function === "function") return;
  var codes = { i: 127, j: 126, f: 125, d: 124 },
    typeIndex = {},
    types = [],
    wrapped = [];
  for (var i = 0; i < functions.length; i++) {
    var func = functions[i],
      sig = func.sig;
    if (typeof sig !== "string" || !/^[vijfd][ijfd]*$/.test(sig) || preparedWrappers.has(func)) continue;
    if (wrapped.indexOf(func) >= 0) continue;
    if (!(sig in typeIndex)) typeIndex[sig] = types.push(sig) - 1;
    wrapped.push(func);
  }
  if (wrapped.length < 2) return;
  function leb(n, out) {
    do {
      var low = n & 127;
      n >>>= 7;
      out.push(n ? low | 128 : low);
    } while (n);
  }
  function name(text, out) {
    leb(text.length, out);
    for (var k = 0; k < text.length; k++) out.push(text.charCodeAt(k));
  }
  function section(id, body, out) {
    out.push(id);
    leb(body.length, out);
    for (var k = 0; k < body.length; k++) out.push(body[k]);
  }
  var typeBody = [],
    importBody = [],
    exportBody = [];
  leb(types.length, typeBody);
  types.forEach(function (sig) {
    typeBody.push(96);
    leb(sig.length - 1, typeBody);
    for (var k = 1; k < sig.length; k++) typeBody.push(codes[sig[k]]);
    if (sig[0] === "v") typeBody.push(0);
    else typeBody.push(1, codes[sig[0]]);
  });
  leb(wrapped.length, importBody);
  leb(wrapped.length, exportBody);
  wrapped.forEach(function (func, k) {
    name("e", importBody);
    name(String(k), importBody);
    importBody.push(0);
    leb(typeIndex[func.sig], importBody);
    name(String(k), exportBody);
    exportBody.push(0);
    leb(k, exportBody);
  });
  var bytes = [0, 97, 115, 109, 1, 0, 0, 0];
  section(1, typeBody, bytes);
  section(2, importBody, bytes);
  section(7, exportBody, bytes);
  var module = new WebAssembly.Module(new Uint8Array(bytes));
  var instance = new WebAssembly.Instance(module, { e: Object.assign({}, wrapped) });
  wrapped.forEach(function (func, k) {
    preparedWrappers.set(func, { sig: func.sig, wrapper: instance.exports[String(k)] });
  });
}
function reportUndefinedSymbols() {
  var functions = [],
    names = [];
  for (var symName in GOT) {
    if (GOT[symName].value == 0) {
      var value = resolveGlobalSymbol(symName, true);
      if (typeof value === "function") {
        names.push(symName);
        functions.push(value);
      } else if (typeof value === "number") {
        GOT[symName].value = value;
      } else {
        assert(false, "bad export type for `" + symName + "`: " + typeof value);
      }
    }
  }
  prepareWrappers(functions);
  for (var i = 0; i < names.length; i++) GOT[names[i]].value = addFunctionWasm(functions[i], functions[i].sig);
}
