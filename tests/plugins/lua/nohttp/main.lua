local loaded_value, load_err = sdk.get_setting("anything")
LOAD_ERR = load_err
sdk.register_tool("nohttp_get", {
  description = "tries http without the capability",
  parameters = { type = "object", properties = { url = { type = "string" } } },
}, function(args)
  local resp, err = sdk.http.get(args.url)
  return tostring(resp) .. "|" .. tostring(err)
end)
sdk.register_tool("nohttp_load_err", { description = "what a load-time data call returned" }, function()
  return tostring(LOAD_ERR)
end)
return { name = "nohttp" }
