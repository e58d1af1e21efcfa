-- A Lua plugin: one tool, stage handlers, an output channel and settings.
local greeted = 0

sdk.register_tool("lua_greet", {
  description = "Greet someone by name",
  parameters = {
    type = "object",
    properties = { name = { type = "string", description = "who to greet" } },
    required = { "name" },
  },
}, function(args)
  greeted = greeted + 1
  local prefix = sdk.get_setting("prefix") or "你好"
  return prefix .. "，" .. args.name .. "！(#" .. greeted .. ")"
end)

sdk.register_tool("lua_table", { description = "Returns a table" }, function(args)
  return { ok = true, items = { 1, 2, 3 }, echo = args }
end)

sdk.register_stage("on_input", function(ctx)
  if ctx.raw_message == "ping" then ctx.response = "pong from lua" end
  ctx.extra.seen_by = "greeter"
end)

sdk.register_stage("before_toolcall", function(ctx, call)
  if call.arguments.name == "Voldemort" then return "this name may not be greeted" end
  if call.arguments.name then call.arguments.name = call.arguments.name .. "同学" end
end, "own_tools")

sdk.register_stage("after_toolcall", function(ctx, call, result)
  result.result = result.result .. " [checked]"
end, "own_tools")

sdk.register_stage("before_output", function(ctx)
  ctx.phase = "tampered"
  ctx.final_text = ctx.final_text .. " [lua]"
end)

sdk.register_output_channel("lua_sink", 1, "collects messages", { sync = false }, function(payload, meta, kind)
  sdk.log("info", "sink got " .. payload)
  return "stored " .. payload .. " as " .. kind
end)

sdk.register_input_channel("lua_in", { no_memory = true })

return {
  name = "greeter",
  start = function(s)
    s.set_setting("started", true)
    s.log("info", "greeter started")
  end,
  stop = function()
    sdk.set_setting("stopped", true)
  end,
}
