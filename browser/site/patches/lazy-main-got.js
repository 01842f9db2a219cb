var FPCAST = "byn$fpcast-emu$",
  NO_FPCAST = "$no-fpcast-emu$";
function relocateMainExports(exports, memoryBase) {
  var relocated = {};
  for (var e in exports) {
    var value = exports[e];
    if (typeof value === "object") value = value.value;
    if (typeof value === "number") value += memoryBase;
    relocated[e] = value;
  }
  mainExports = relocated;
  for (var symName in GOT) if (GOT[symName].value == 0) linkFromMain(symName);
  return relocated;
}
function gotEntry(name) {
  if (!GOT[name] && mainExports !== null) linkFromMain(name);
  var pending = pendingGOT[name];
  if (pending !== undefined) {
    delete pendingGOT[name];
    for (var i = 0; i < pending.length; i += 2) {
      var only = {};
      only[pending[i + 1]] = true;
      updateGOT(pending[i], only);
    }
  }
  return GOT[name];
}
function deferGOT(name, exports, symName) {
  (pendingGOT[name] || (pendingGOT[name] = [])).push(exports, symName);
}
function mainSymbol(name) {
  var exports = mainExports,
    FP = FPCAST,
    NO = NO_FPCAST,
    value;
  if (name.startsWith(NO)) {
    var base = name.substring(NO.length);
    if (base.startsWith(FP) || !(FP + base in exports)) return undefined;
    value = exports["orig$" + base];
    if (typeof value === "function") return value;
    value = exports[base];
    return typeof value === "function" && !isInternalSym(base) ? value : undefined;
  }
  var plain = !name.startsWith(FP) && !(FP + name in exports);
  value = exports["orig$" + FP + name];
  if (typeof value === "function") return value;
  value = exports["orig$" + name];
  if (value !== undefined && (plain || typeof value !== "function")) return value;
  value = exports[FP + name];
  if (typeof value === "function") return value;
  value = exports[name];
  if (value !== undefined && (plain || typeof value !== "function") && !isInternalSym(name)) return value;
  return undefined;
}
function defineFromMain(name) {
  if (GOT[name] && GOT[name].value != 0) return;
  var value = mainSymbol(name);
  if (typeof value !== "function" && typeof value !== "number") return;
  if (!GOT[name]) GOT[name] = new WebAssembly.Global({ value: "i32", mutable: true });
  GOT[name].value = typeof value === "function" ? addFunctionWasm(value) : value;
}
function linkFromMain(name) {
  var FP = FPCAST,
    NO = NO_FPCAST,
    fpcast = name,
    plain = null;
  if (name.startsWith(NO)) {
    fpcast = name.substring(NO.length);
    plain = name;
  } else if (!(name in mainExports)) {
    return;
  } else if (typeof mainExports[FP + name] === "function") {
    plain = NO + name;
  }
  defineFromMain(fpcast);
  if (plain === null) return;
  defineFromMain(plain);
  if (GOT[fpcast] && GOT[plain] && GOT[fpcast].value && GOT[plain].value) {
    dyncallInvokeMap[GOT[fpcast].value] = GOT[plain].value;
  }
}
