package claims

// Test hooks: faults of a process, simulated in-process.

// pause holds the loop before its next cycle, as if the process were stopped (SIGSTOP);
// it returns once no cycle is running.
func (m *Manager) pause() {
	m.mu.Lock()
	if m.mu.paused == nil {
		m.mu.paused = make(chan struct{})
	}
	m.mu.Unlock()
	m.cycleMu.Lock()
	defer m.cycleMu.Unlock()
}

// resume lets a paused loop run again; the held cycle starts at once.
func (m *Manager) resume() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.paused != nil {
		close(m.mu.paused)
		m.mu.paused = nil
	}
}

// abandon ends the loop without releasing or deregistering anything, as if the process
// were killed (SIGKILL). Stop does nothing afterwards.
func (m *Manager) abandon() {
	m.mu.Lock()
	if !m.mu.started || m.mu.stopped {
		m.mu.Unlock()
		return
	}
	c, cancel := m.stopLoopLocked()
	m.mu.Unlock()
	<-c.Stop().Done()
	cancel()
}
