# gpuenv BallChase for Godot 4 (GDScript 2), speaking the godot-rl wire protocol (godot-rl 0.8.x,
# protocol 0.7) - the same game as ../godot/project (Godot 3.2), on Godot 4's physics.
#
# Python listens on 127.0.0.1:PORT; this process connects (retrying while Python starts). Each message
# is a 4-byte little-endian length then JSON text (StreamPeer.put_string/get_string frame exactly so).
# Messages from Python: handshake (no reply), env_info, reset, action, call, close.
#
# BallChase: N agents, each alone in its own square arena (agents never touch each other), a body
# moved by the physics engine (move_and_slide against four static walls) chasing a target point.
# --dims=3 (default): a CharacterBody3D sphere on the XZ plane between box walls, stepped by the
# project's 3D engine (GodotPhysics3D, or Jolt Physics through override.cfg); --dims=2: the 3.2
# project's scene (CharacterBody2D circle, rectangle walls) on GodotPhysics2D.
# Action "move": continuous, 2 values in [-1, 1] (velocity as a fraction of SPEED).
# Observation "obs" (6): target minus position / ARENA, position / ARENA * 2 - 1, velocity / SPEED.
# Reward per agent step: 10 x (distance closed) / ARENA, plus 1 when the target is caught (then it
# moves). An episode is EPISODE_STEPS agent steps (a time limit); the agent resets itself when it
# ends: the obs sent with done=true is the first of the next episode, the final one is in
# info.terminal_obs. One agent step = ACTION_REPEAT physics ticks of 1/60 s of game time.
extends Node

const MAJOR_VERSION := "0"
const MINOR_VERSION := "7"
const ARENA := 200.0
const SPEED := 100.0
const CATCH_RADIUS := 12.0
const AGENT_RADIUS := 6.0
const WALL_HEIGHT := 20.0
const EPISODE_STEPS := 200
const JOLT := "physics/jolt_physics_3d/simulation/"

var port := 11008
var env_seed := 0
var action_repeat := 8
var speedup := 1
var n_agents := 16
var dims := 3
var stream: StreamPeerTCP = null
var ticks := 0
var waiting_reply := false
var agents: Array = []
var t_start_usec := 0


class Agent:
	var body: Node  # CharacterBody3D (dims 3) or CharacterBody2D (dims 2)
	var dims := 3
	var origin := Vector2()
	var target := Vector2()
	var velocity := Vector2()
	var steps := 0
	var reward := 0.0
	var done := false
	var terminal: Array = []
	var last_dist := 0.0
	var rng := RandomNumberGenerator.new()

	func pos() -> Vector2:
		if dims == 3:
			return Vector2(body.position.x, body.position.z)
		return body.position

	func set_pos(p: Vector2) -> void:
		if dims == 3:
			body.position = Vector3(p.x, 0.0, p.y)
		else:
			body.position = p

	func random_point() -> Vector2:
		return origin + Vector2(rng.randf_range(AGENT_RADIUS, ARENA - AGENT_RADIUS), rng.randf_range(AGENT_RADIUS, ARENA - AGENT_RADIUS))

	func reset() -> void:
		set_pos(random_point())
		target = random_point()
		velocity = Vector2()
		steps = 0
		last_dist = pos().distance_to(target)

	func obs() -> Array:
		var p0 := pos()
		var rel := (target - p0) / ARENA
		var p := (p0 - origin) / ARENA * 2.0 - Vector2(1, 1)
		var v := velocity / SPEED
		return [clampf(rel.x, -1, 1), clampf(rel.y, -1, 1), clampf(p.x, -1, 1), clampf(p.y, -1, 1), clampf(v.x, -1, 1), clampf(v.y, -1, 1)]

	func tick() -> void:
		if dims == 3:
			body.velocity = Vector3(velocity.x, 0.0, velocity.y)
			body.move_and_slide()
			velocity = Vector2(body.velocity.x, body.velocity.z)
		else:
			body.velocity = velocity
			body.move_and_slide()
			velocity = body.velocity

	func end_step() -> void:
		# called after ACTION_REPEAT ticks: reward for the step, and its end
		var d := pos().distance_to(target)
		reward = 10.0 * (last_dist - d) / ARENA
		if d < CATCH_RADIUS:
			reward += 1.0
			target = random_point()
			d = pos().distance_to(target)
		last_dist = d
		steps += 1
		done = steps >= EPISODE_STEPS
		terminal = []
		if done:
			terminal = obs()  # sent in info: the observation the episode ended on
			reset()


func _args() -> Dictionary:
	var out := {}
	for a in OS.get_cmdline_args() + OS.get_cmdline_user_args():
		if a.begins_with("--") and "=" in a:
			var kv: PackedStringArray = a.substr(2).split("=", true, 1)
			out[kv[0]] = kv[1]
	return out


func _ready() -> void:
	var args := _args()
	port = int(args.get("port", "11008"))
	env_seed = int(args.get("env_seed", "0"))
	action_repeat = maxi(1, int(args.get("action_repeat", "8")))
	speedup = maxi(1, int(args.get("speedup", "1")))
	n_agents = maxi(1, int(args.get("n_agents", "16")))
	dims = 2 if args.get("dims", "3") == "2" else 3
	Engine.physics_ticks_per_second = 60 * speedup
	Engine.time_scale = speedup
	for i in range(n_agents):
		agents.append(_make_agent(i))
	if not _connect():
		printerr("gpuenv ballchase: no connection to 127.0.0.1:%d" % port)
		get_tree().quit(1)
		return
	t_start_usec = Time.get_ticks_usec()


func _wall(origin: Vector2, offset: Vector2, size: Vector2, parent: Node) -> void:
	# a wall of size (x, y) on the plane, its corner at origin + offset
	var centre := origin + offset + size / 2.0
	if dims == 3:
		var cs := CollisionShape3D.new()
		var box := BoxShape3D.new()
		box.size = Vector3(size.x, WALL_HEIGHT, size.y)
		cs.shape = box
		cs.position = Vector3(centre.x, 0.0, centre.y)
		parent.add_child(cs)
	else:
		var cs2 := CollisionShape2D.new()
		var rect := RectangleShape2D.new()
		rect.size = size
		cs2.shape = rect
		cs2.position = centre
		parent.add_child(cs2)


func _make_agent(i: int) -> Agent:
	var a := Agent.new()
	a.dims = dims
	a.rng.seed = env_seed * 1000003 + i
	a.origin = Vector2((i % 64) * (ARENA + 50.0), (i / 64) * (ARENA + 50.0))
	var walls: CollisionObject3D = null
	var walls2: CollisionObject2D = null
	var parent: Node
	if dims == 3:
		walls = StaticBody3D.new()
		parent = walls
	else:
		walls2 = StaticBody2D.new()
		parent = walls2
	parent.collision_layer = 2
	parent.collision_mask = 0
	_wall(a.origin, Vector2(0, -10), Vector2(ARENA, 10), parent)
	_wall(a.origin, Vector2(0, ARENA), Vector2(ARENA, 10), parent)
	_wall(a.origin, Vector2(-10, 0), Vector2(10, ARENA), parent)
	_wall(a.origin, Vector2(ARENA, 0), Vector2(10, ARENA), parent)
	add_child(parent)
	var body: Node
	if dims == 3:
		var b3 := CharacterBody3D.new()
		b3.motion_mode = CharacterBody3D.MOTION_MODE_FLOATING
		var cs := CollisionShape3D.new()
		var sphere := SphereShape3D.new()
		sphere.radius = AGENT_RADIUS
		cs.shape = sphere
		b3.add_child(cs)
		body = b3
	else:
		var b2 := CharacterBody2D.new()
		b2.motion_mode = CharacterBody2D.MOTION_MODE_FLOATING
		var cs2 := CollisionShape2D.new()
		var circle := CircleShape2D.new()
		circle.radius = AGENT_RADIUS
		cs2.shape = circle
		b2.add_child(cs2)
		body = b2
	body.collision_layer = 1
	body.collision_mask = 2
	add_child(body)
	a.body = body
	a.reset()
	return a


func _connect() -> bool:
	var deadline := Time.get_ticks_msec() + 60000
	while Time.get_ticks_msec() < deadline:
		stream = StreamPeerTCP.new()
		if stream.connect_to_host("127.0.0.1", port) == OK:
			var wait_until := Time.get_ticks_msec() + 1000
			stream.poll()
			while stream.get_status() == StreamPeerTCP.STATUS_CONNECTING and Time.get_ticks_msec() < wait_until:
				OS.delay_msec(1)
				stream.poll()
			if stream.get_status() == StreamPeerTCP.STATUS_CONNECTED:
				stream.set_no_delay(true)
				return true
		OS.delay_msec(20)
	return false


func _send(d: Dictionary) -> void:
	stream.put_string(JSON.stringify(d))


func _receive() -> Variant:
	stream.poll()
	if stream.get_status() != StreamPeerTCP.STATUS_CONNECTED:
		return null
	var text := stream.get_string(-1)
	stream.poll()
	if text == "" and stream.get_status() != StreamPeerTCP.STATUS_CONNECTED:
		return null
	return JSON.parse_string(text)


func _physics_process(_delta: float) -> void:
	if stream == null:
		return
	for a in agents:
		a.tick()
	ticks += 1
	if waiting_reply and ticks % action_repeat != 0:
		return
	if waiting_reply:
		var obs := []
		var rewards := []
		var dones := []
		var infos := []
		for a in agents:
			a.end_step()
			obs.append({"obs": a.obs()})
			rewards.append(a.reward)
			dones.append(a.done)
			infos.append({"terminal_obs": a.terminal} if a.done else {})
		_send({"type": "step", "obs": obs, "reward": rewards, "done": dones, "info": infos})
		waiting_reply = false
	_handle_messages()


func _quit() -> void:
	set_physics_process(false)
	get_tree().quit(0)


func _handle_messages() -> void:
	while true:
		var msg: Variant = _receive()
		if msg == null or typeof(msg) != TYPE_DICTIONARY:
			_quit()  # Python went away: nothing to run for
			return
		var kind: String = msg.get("type", "")
		if kind == "handshake":
			continue
		elif kind == "env_info":
			var obs_space := []
			var act_space := []
			var names := []
			for _a in agents:
				obs_space.append({"obs": {"size": [6], "space": "box"}})
				act_space.append({"move": {"size": 2, "action_type": "continuous"}})
				names.append("shared_policy")
			_send({"type": "env_info", "n_agents": n_agents, "observation_space": obs_space, "action_space": act_space, "agent_policy_names": names})
		elif kind == "reset":
			var obs := []
			for a in agents:
				a.reset()
				obs.append({"obs": a.obs()})
			_send({"type": "reset", "obs": obs})
		elif kind == "call":
			# gpuenv's own: the engine's accounting (physics ticks, microseconds since connecting),
			# its version and the 3D physics engine it runs
			_send({"type": "call", "returns": [Engine.get_physics_frames(), Time.get_ticks_usec() - t_start_usec, Engine.get_version_info()["string"], _engine(), _solver()]})
		elif kind == "action":
			var actions: Array = msg["action"]
			for i in range(agents.size()):
				var m: Array = actions[i]["move"]
				agents[i].velocity = Vector2(clampf(float(m[0]), -1, 1), clampf(float(m[1]), -1, 1)) * SPEED
			waiting_reply = true
			ticks = 0
			return
		elif kind == "close":
			_quit()
			return


func _engine() -> String:
	# the physics engine that runs: an unknown name in the setting falls back to Godot's own silently,
	# and Jolt is there only where the build has its module (its settings exist)
	if dims == 2:
		var asked2: String = ProjectSettings.get_setting("physics/2d/physics_engine", "DEFAULT")
		return "GodotPhysics2D" if asked2 in ["GodotPhysics2D", "DEFAULT", ""] else "%s (2D; not checked by gpuenv)" % asked2
	var asked: String = ProjectSettings.get_setting("physics/3d/physics_engine", "DEFAULT")
	if asked == "Jolt Physics" and ProjectSettings.has_setting(JOLT + "velocity_steps"):
		return asked
	if asked in ["GodotPhysics3D", "DEFAULT", ""]:
		return "GodotPhysics3D"
	return "GodotPhysics3D (%s asked for; not in this build)" % asked


func _solver() -> Dictionary:
	# the settings that decide the physics' cost and accuracy, for the records
	var out := {"physics_ticks_per_second": Engine.physics_ticks_per_second, "max_physics_steps_per_frame": Engine.max_physics_steps_per_frame}
	if _engine() == "Jolt Physics":
		for k in ["velocity_steps", "position_steps", "penetration_slop", "speculative_contact_distance"]:
			out["jolt_" + k] = ProjectSettings.get_setting(JOLT + k)
	elif dims == 3:
		out["solver_iterations"] = ProjectSettings.get_setting("physics/3d/solver/solver_iterations")
		out["contact_max_separation"] = ProjectSettings.get_setting("physics/3d/solver/contact_max_separation")
	else:
		out["solver_iterations"] = ProjectSettings.get_setting("physics/2d/solver/solver_iterations")
	return out
