print("fetch weather")
