console.log("sidecar")
