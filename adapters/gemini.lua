-- gemini: Google Gemini API generateContent / streamGenerateContent (alt=sse).
-- https://ai.google.dev/api/generate-content ; function calling:
-- https://ai.google.dev/gemini-api/docs/function-calling
-- Auth: x-goog-api-key from build_headers. Roles user|model; system -> systemInstruction;
-- tools -> functionDeclarations; tool results -> functionResponse parts.
-- Usage: promptTokenCount already includes cachedContentTokenCount (OpenAI semantics);
-- completion = candidates + thoughts tokens, as OpenAI counts reasoning in completion.
local FINISH = { STOP = "stop", MAX_TOKENS = "length", SAFETY = "content_filter",
  RECITATION = "content_filter", BLOCKLIST = "content_filter",
  PROHIBITED_CONTENT = "content_filter", SPII = "content_filter" }

local function usage(u)
  if type(u) ~= "table" then return nil end
  local thoughts = u.thoughtsTokenCount
  local out = { prompt = u.promptTokenCount or 0,
    completion = (u.candidatesTokenCount or 0) + (thoughts or 0) }
  out.total = u.totalTokenCount or (out.prompt + out.completion)
  if u.cachedContentTokenCount ~= nil then
    out.cache_reported = true
    out.cache_read = u.cachedContentTokenCount
    out.cache_miss = math.max(out.prompt - u.cachedContentTokenCount, 0)
  end
  if thoughts ~= nil then out.reasoning_tokens = thoughts end
  return out
end

local function parts_of(content)
  local parts = json.array()
  if type(content) == "string" then
    if content ~= "" then parts[1] = { text = content } end
    return parts
  end
  if type(content) ~= "table" then return parts end
  for _, b in ipairs(content) do
    if type(b) == "table" then
      if b.type == "text" and type(b.text) == "string" then
        parts[#parts + 1] = { text = b.text }
      elseif b.type == "image_url" or b.type == "input_audio" then
        local url = type(b.image_url) == "table" and b.image_url.url or b.image_url
        local mime, data = compat.data_url(url)
        if b.type == "input_audio" and type(b.input_audio) == "table" then
          mime, data = "audio/" .. (b.input_audio.format or "wav"), b.input_audio.data
        end
        if mime then
          parts[#parts + 1] = { inline_data = { mime_type = mime, data = data } }
        elseif type(url) == "string" then
          parts[#parts + 1] = { file_data = { file_uri = url } }
        end
      end
    end
  end
  return parts
end

local function tool_response(content)
  local v = json.decode(type(content) == "string" and content or "")
  if type(v) == "table" and v[1] == nil then return v end
  return { result = compat.text_of(content) }
end

local function finish_of(cand, has_calls)
  local fr = cand.finishReason
  if fr == nil then return nil end
  if has_calls and fr == "STOP" then return "tool_calls" end
  return FINISH[fr] or string.lower(fr)
end

local function read_candidate(body)
  if type(body.promptFeedback) == "table" and body.promptFeedback.blockReason then
    error("prompt blocked: " .. tostring(body.promptFeedback.blockReason), 0)
  end
  local cand = type(body.candidates) == "table" and body.candidates[1] or nil
  return cand or {}
end

return {
  name = "gemini",
  version = "2.0.0",
  endpoint = "/v1beta/models/{model}:generateContent",
  stream_endpoint = "/v1beta/models/{model}:streamGenerateContent?alt=sse",
  headers = {},

  build_headers = function(meta)
    if type(meta.api_key) == "string" and meta.api_key ~= "" then
      return { ["x-goog-api-key"] = meta.api_key }
    end
    return {}
  end,

  transform_request = function(raw)
    local req = json.decode(raw)
    if type(req) ~= "table" then error("unified request is not JSON", 0) end
    local names, system, contents = {}, {}, json.array()
    local function push(role, parts)
      if #parts == 0 then return end
      local last = contents[#contents]
      if last and last.role == role then
        for _, p in ipairs(parts) do last.parts[#last.parts + 1] = p end
      else
        contents[#contents + 1] = { role = role, parts = parts }
      end
    end
    for _, m in ipairs(req.messages or {}) do
      if m.role == "system" then
        system[#system + 1] = compat.text_of(m.content)
      elseif m.role == "assistant" then
        local parts = parts_of(m.content)
        for _, tc in ipairs(m.tool_calls or {}) do
          local fn = tc["function"] or {}
          local name = fn.name or tc.name or ""
          names[tc.id or ""] = name
          parts[#parts + 1] = { functionCall = { name = name,
            args = compat.args(fn.arguments or tc.arguments) } }
        end
        push("model", parts)
      elseif m.role == "tool" then
        push("user", json.array({ { functionResponse = {
          name = names[m.tool_call_id or ""] or m.name or "tool",
          response = tool_response(m.content) } } }))
      else
        push("user", parts_of(m.content))
      end
    end
    local body = { contents = contents, generationConfig = {
      temperature = req.temperature or 0.7, maxOutputTokens = req.max_tokens or 4096 } }
    if req.disable_thinking then body.generationConfig.thinkingConfig = { thinkingBudget = 0 } end
    if #system > 0 then
      body.systemInstruction = { parts = json.array({ { text = table.concat(system, "\n\n") } }) }
    end
    if type(req.tools) == "table" and #req.tools > 0 then
      local decls = json.array()
      for _, t in ipairs(req.tools) do
        local fn = t["function"] or t
        decls[#decls + 1] = { name = fn.name, description = fn.description,
          parameters = fn.parameters }
      end
      body.tools = json.array({ { functionDeclarations = decls } })
      local tc = req.tool_choice
      if tc == "none" then body.toolConfig = { functionCallingConfig = { mode = "NONE" } }
      elseif tc == "required" then body.toolConfig = { functionCallingConfig = { mode = "ANY" } }
      elseif type(tc) == "table" and type(tc["function"]) == "table" then
        body.toolConfig = { functionCallingConfig = { mode = "ANY",
          allowedFunctionNames = json.array({ tc["function"].name }) } }
      end
    end
    return json.encode(body)
  end,

  transform_response = function(raw)
    local body = compat.decode_body(raw)
    local cand = read_candidate(body)
    local text, thoughts, calls = {}, {}, json.array()
    local content = type(cand.content) == "table" and cand.content or {}
    for _, p in ipairs(content.parts or {}) do
      if type(p.functionCall) == "table" then
        calls[#calls + 1] = { id = p.functionCall.id or ("call_" .. #calls), type = "function",
          name = p.functionCall.name, arguments = compat.args(p.functionCall.args) }
      elseif type(p.text) == "string" then
        if p.thought then thoughts[#thoughts + 1] = p.text else text[#text + 1] = p.text end
      end
    end
    local out = { content = table.concat(text),
      finish_reason = finish_of(cand, #calls > 0) or "",
      token_usage = usage(body.usageMetadata) or { prompt = 0, completion = 0, total = 0 } }
    if #thoughts > 0 then out.reasoning_content = table.concat(thoughts) end
    if #calls > 0 then out.tool_calls = calls end
    return json.encode(out)
  end,

  transform_stream_chunk = function(line, state)
    state = state or {}
    local body = compat.decode_body(line, "stream line")
    local cand = read_candidate(body)
    local out = { content = "", done = false }
    local text, thoughts, calls = {}, {}, json.array()
    local content = type(cand.content) == "table" and cand.content or {}
    for _, p in ipairs(content.parts or {}) do
      if type(p.functionCall) == "table" then
        local idx = state.calls or 0
        state.calls = idx + 1
        calls[#calls + 1] = { id = p.functionCall.id or ("call_" .. idx), type = "function",
          name = p.functionCall.name, raw_arguments = json.encode(compat.args(p.functionCall.args)),
          stream_index = idx }
      elseif type(p.text) == "string" then
        if p.thought then thoughts[#thoughts + 1] = p.text else text[#text + 1] = p.text end
      end
    end
    out.content = table.concat(text)
    if #thoughts > 0 then out.reasoning_content = table.concat(thoughts) end
    if #calls > 0 then out.tool_calls = calls end
    local fr = finish_of(cand, (state.calls or 0) > 0)
    if fr then out.done = true; out.finish_reason = fr end
    out.usage = usage(body.usageMetadata)
    return json.encode(out)
  end,

  transform_error = function(status, body)
    return compat.error_reason(status, body)
  end,
}
