-- anthropic: Messages API, https://docs.anthropic.com/en/api/messages
-- Streaming events: https://docs.anthropic.com/en/docs/build-with-claude/streaming
-- System messages are concatenated into `system`; tool calls map to tool_use / tool_result
-- blocks; images (data: or http URLs) to image blocks. Auth: x-api-key from build_headers.
-- Usage in OpenAI semantics: prompt = input + cache_read + cache_creation.
local FINISH = { end_turn = "stop", stop_sequence = "stop", max_tokens = "length",
  tool_use = "tool_calls", pause_turn = "stop", refusal = "content_filter" }

local function usage(u, prior)
  if type(u) ~= "table" then return nil end
  prior = prior or {}
  local input = u.input_tokens or prior.input or 0
  local read = u.cache_read_input_tokens or prior.read
  local created = u.cache_creation_input_tokens or prior.created
  local out = { completion = u.output_tokens or 0 }
  out.prompt = input + (read or 0) + (created or 0)
  if read ~= nil or created ~= nil then
    out.cache_reported = true
    out.cache_read = read or 0
    out.cache_miss = created or 0
  end
  out.total = out.prompt + out.completion
  return out, { input = input, read = read, created = created }
end

local function image_block(url)
  local mime, data = compat.data_url(url)
  if mime then return { type = "image", source = { type = "base64", media_type = mime, data = data } } end
  return { type = "image", source = { type = "url", url = url } }
end

local function blocks(content)
  if type(content) == "string" then
    if content == "" then return json.array() end
    return json.array({ { type = "text", text = content } })
  end
  local out = json.array()
  if type(content) ~= "table" then return out end
  for _, b in ipairs(content) do
    if type(b) == "table" then
      if b.type == "text" and type(b.text) == "string" then
        out[#out + 1] = { type = "text", text = b.text }
      elseif b.type == "image_url" then
        local url = type(b.image_url) == "table" and b.image_url.url or b.image_url
        if type(url) == "string" then out[#out + 1] = image_block(url) end
      end
    end
  end
  return out
end

local function convert_tool_choice(tc)
  if tc == "auto" then return { type = "auto" } end
  if tc == "none" then return { type = "none" } end
  if tc == "required" then return { type = "any" } end
  if type(tc) == "table" and type(tc["function"]) == "table" then
    return { type = "tool", name = tc["function"].name }
  end
  return nil
end

return {
  name = "anthropic",
  version = "2.0.0",
  endpoint = "/v1/messages",
  headers = { ["anthropic-version"] = "2023-06-01" },

  build_headers = function(meta)
    local h = { ["anthropic-version"] = "2023-06-01" }
    if type(meta.api_key) == "string" and meta.api_key ~= "" then h["x-api-key"] = meta.api_key end
    return h
  end,

  transform_request = function(raw)
    local req = json.decode(raw)
    if type(req) ~= "table" then error("unified request is not JSON", 0) end
    local system, messages = {}, json.array()
    local function push(role, content)
      local last = messages[#messages]
      if last and last.role == role then
        for _, b in ipairs(content) do last.content[#last.content + 1] = b end
      else
        messages[#messages + 1] = { role = role, content = content }
      end
    end
    for _, m in ipairs(req.messages or {}) do
      if m.role == "system" then
        system[#system + 1] = compat.text_of(m.content)
      elseif m.role == "tool" then
        push("user", json.array({ { type = "tool_result", tool_use_id = m.tool_call_id or "",
          content = compat.text_of(m.content) } }))
      elseif m.role == "assistant" then
        local content = blocks(m.content)
        for _, tc in ipairs(m.tool_calls or {}) do
          local fn = tc["function"] or {}
          content[#content + 1] = { type = "tool_use", id = tc.id or "",
            name = fn.name or tc.name or "", input = compat.args(fn.arguments or tc.arguments) }
        end
        if #content > 0 then push("assistant", content) end
      else
        local content = blocks(m.content)
        if #content > 0 then push("user", content) end
      end
    end
    local body = {
      model = (req.model ~= nil and req.model ~= "" and req.model ~= "AUTO") and req.model
        or "claude-sonnet-4-20250514",
      max_tokens = req.max_tokens or 4096,
      messages = messages,
      stream = req.stream and true or false,
    }
    if req.temperature ~= nil then body.temperature = math.min(req.temperature, 1) end
    if #system > 0 then body.system = table.concat(system, "\n\n") end
    if type(req.tools) == "table" and #req.tools > 0 then
      local tools = json.array()
      for _, t in ipairs(req.tools) do
        local fn = t["function"] or t
        tools[#tools + 1] = { name = fn.name, description = fn.description,
          input_schema = fn.parameters or { type = "object", properties = {} } }
      end
      body.tools = tools
      body.tool_choice = convert_tool_choice(req.tool_choice)
    end
    return json.encode(body)
  end,

  transform_response = function(raw)
    local body = compat.decode_body(raw)
    if body.type ~= "message" or type(body.content) ~= "table" then
      error("not an Anthropic message body", 0)
    end
    local text, thinking, calls = {}, {}, json.array()
    for _, b in ipairs(body.content) do
      if b.type == "text" then text[#text + 1] = b.text
      elseif b.type == "thinking" then thinking[#thinking + 1] = b.thinking
      elseif b.type == "tool_use" and b.name and b.name ~= "" then
        calls[#calls + 1] = { id = b.id or "", type = "function", name = b.name,
          arguments = compat.args(b.input) }
      end
    end
    local out = {
      content = table.concat(text),
      finish_reason = FINISH[body.stop_reason] or body.stop_reason or "",
      token_usage = usage(body.usage) or { prompt = 0, completion = 0, total = 0 },
    }
    if #thinking > 0 then out.reasoning_content = table.concat(thinking) end
    if #calls > 0 then out.tool_calls = calls end
    return json.encode(out)
  end,

  transform_stream_chunk = function(line, state)
    state = state or {}
    local ev = json.decode(line)
    if type(ev) ~= "table" then error("stream line is not JSON: " .. line:sub(1, 80), 0) end
    local t = ev.type
    if t == "message_start" then
      local u, prior = usage(type(ev.message) == "table" and ev.message.usage or nil)
      state.prior = prior
      if not u then return "" end
      return json.encode({ content = "", done = false, usage = u })
    elseif t == "content_block_start" then
      local b = ev.content_block or {}
      if b.type == "tool_use" then
        return json.encode({ content = "", done = false, tool_calls = json.array({
          { id = b.id, type = "function", name = b.name, raw_arguments = "",
            stream_index = ev.index or 0 } }) })
      end
      return ""
    elseif t == "content_block_delta" then
      local d = ev.delta or {}
      if d.type == "text_delta" then
        return json.encode({ content = d.text or "", done = false })
      elseif d.type == "thinking_delta" then
        return json.encode({ content = "", reasoning_content = d.thinking or "", done = false })
      elseif d.type == "input_json_delta" then
        return json.encode({ content = "", done = false, tool_calls = json.array({
          { raw_arguments = d.partial_json or "", stream_index = ev.index or 0 } }) })
      end
      return ""
    elseif t == "message_delta" then
      local d = ev.delta or {}
      local out = { content = "", done = true,
        finish_reason = FINISH[d.stop_reason] or d.stop_reason or "stop" }
      out.usage = usage(ev.usage, state.prior)
      return json.encode(out)
    elseif t == "message_stop" then
      return json.encode({ content = "", done = true })
    elseif t == "error" then
      local e = ev.error or {}
      return json.encode({ content = "", done = true,
        error = tostring(e.type or "error") .. ": " .. tostring(e.message or "") })
    end
    return "" -- ping, content_block_stop
  end,

  transform_error = function(status, body)
    return compat.error_reason(status, body)
  end,
}
