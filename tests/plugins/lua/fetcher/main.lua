sdk.register_tool("fetch_get", {
  description = "GET a URL",
  parameters = { type = "object", properties = { url = { type = "string" } }, required = { "url" } },
}, function(args)
  local resp, err = sdk.http.get(args.url, { ["X-Probe"] = "lua" })
  if err then return nil, err end
  return resp.status .. " " .. resp.body
end)
sdk.register_tool("fetch_post", {
  description = "POST JSON",
  parameters = { type = "object", properties = { url = { type = "string" } }, required = { "url" } },
}, function(args)
  local resp, err = sdk.http.post(args.url, sdk.json.encode({ city = "杭州" }), "application/json")
  if err then return nil, err end
  return resp.status .. " " .. resp.body
end)
sdk.register_tool("fetch_memory", { description = "memory is not declared" }, function(args)
  local r, err = sdk.memory.recall({ "x" }, 2)
  return tostring(r) .. "|" .. tostring(err)
end)
return { name = "fetcher" }
