-- __plugin_name__: a Lua HomeAgent plugin.
return {
  name = "__plugin_name__",
  start = function(sdk)
    sdk.register_tool("__ident___greet", {
      description = "Greet someone by name.",
      parameters = { type = "object", properties = { who = { type = "string" } }, required = { "who" } },
    }, function(args)
      return "Hello, " .. tostring(args.who) .. "!"
    end)
  end,
  stop = function() end,
}
