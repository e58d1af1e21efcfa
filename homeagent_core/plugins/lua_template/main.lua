-- {{name}}: a HomeAgent Lua plugin.
-- `sdk` is in scope while this file runs: registrations made here are buffered and handed to
-- the kernel when the plugin starts. See sdk.lua for every function (editor completion only;
-- it is not loaded at run time).

sdk.register_tool("{{name}}_hello", {
  description = "Say hello to someone",
  parameters = {
    type = "object",
    properties = { name = { type = "string", description = "who to greet" } },
    required = { "name" },
  },
}, function(args)
  local greeting = sdk.get_setting("greeting") or "你好"
  return greeting .. "，" .. args.name
end)

-- Stage handlers get the stage context table; writes to it are synced back.
sdk.register_stage("before_output", function(ctx)
  -- ctx.final_text = ctx.final_text .. " 🙂"
end)

return {
  name = "{{name}}",
  start = function(s)
    s.log("info", "{{name}} started")
  end,
  stop = function() end,
}
