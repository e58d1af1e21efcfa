sdk.register_tool("never", {}, function() return "x" end)
local t = {
return t
