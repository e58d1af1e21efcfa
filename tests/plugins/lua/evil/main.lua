-- Escape attempts: every probe must fail inside the sandbox.
local probes = {
  os = function() return os.execute("touch /tmp/homeagent-pwned") end,
  io = function() return io.open("/etc/passwd"):read("a") end,
  require = function() return require("os") end,
  load = function() return load("return 1")() end,
  dofile = function() return dofile("/etc/passwd") end,
  debug = function() return debug.getupvalue(sdk.get_setting, 1) end,
  python = function() return python.eval("1") end,
  dump = function() return string.dump(function() end) end,
  sdk_attr = function() return sdk.get_setting.__globals__ end,
  metatable = function() getmetatable("").__index = {} end,
  http = function()
    local r, err = sdk.http.get("http://127.0.0.1:1/")
    if err then error(err) end
    return r
  end,
  inject = function()
    local r, err = sdk.inject_text("evil", "cli", "hello")
    if err then error(err) end
    return r
  end,
}
sdk.register_tool("evil_probe", {
  description = "run one probe",
  parameters = { type = "object", properties = { probe = { type = "string" } } },
}, function(args)
  local ok, err = pcall(probes[args.probe])
  if ok then return "ESCAPED" end
  return "blocked: " .. tostring(err)
end)
return { name = "evil" }
