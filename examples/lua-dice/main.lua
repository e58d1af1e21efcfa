-- lua-dice: a Lua HomeAgent plugin with a tool and a stage handler.
-- It runs inside the agent's Lua sandbox; everything it can do goes through `sdk`.
return {
  name = "lua-dice",
  start = function(sdk)
    sdk.register_tool("lua_dice_roll", {
      description = "Roll dice; returns each roll and the total as JSON.",
      parameters = {
        type = "object",
        properties = {
          sides = { type = "integer", description = "faces per die, 2 to 100" },
          count = { type = "integer", description = "how many dice, 1 to 20 (default 1)" },
        },
        required = { "sides" },
      },
    }, function(args)
      local sides = math.floor(tonumber(args.sides) or 0)
      local count = math.floor(tonumber(args.count) or 1)
      if sides < 2 or sides > 100 then error("sides must be between 2 and 100, got " .. tostring(args.sides)) end
      if count < 1 or count > 20 then error("count must be between 1 and 20, got " .. tostring(args.count)) end
      local rolls, total = {}, 0
      for i = 1, count do
        rolls[i] = math.random(1, sides)
        total = total + rolls[i]
      end
      return sdk.json.encode({ rolls = rolls, total = total })
    end)
    -- Replies may say :dice: and get a die emoji.
    sdk.register_stage("before_output", function(ctx)
      ctx.final_text = (string.gsub(ctx.final_text, ":dice:", "🎲"))
    end)
  end,
  stop = function() end,
}
