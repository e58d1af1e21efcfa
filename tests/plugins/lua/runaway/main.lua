sdk.register_tool("runaway_loop", { description = "never returns" }, function(args)
  while true do end
end)
sdk.register_tool("runaway_hog", { description = "eats memory" }, function(args)
  local t = {}
  for i = 1, 1e9 do t[i] = string.rep("x", 64) .. i end
end)
sdk.register_stage("after_output", function(ctx) while true do end end)
sdk.register_tool("runaway_ok", { description = "still fine" }, function(args) return "still here" end)
return { name = "runaway" }
