-- Handlers that fail in different ways; "fine" keeps working.
sdk.register_tool("faulty_raise", { description = "raises" }, function(args)
  local t = nil
  return t.field
end)
sdk.register_tool("faulty_err", { description = "returns an error" }, function(args)
  return nil, "disk is full"
end)
sdk.register_tool("faulty_fine", { description = "works" }, function(args) return "fine" end)
sdk.register_stage("pre_action", function(ctx) error("stage exploded") end)
sdk.register_stage("pre_action", function(ctx) ctx.llm_text = "second handler ran" end)
return { name = "faulty" }
